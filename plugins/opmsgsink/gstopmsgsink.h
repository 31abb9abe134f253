// opmsgsink: raw network outputs → openpilot's driving messages (log file, ZMQ, signal).
#pragma once

#include <gst/base/gstbasesink.h>

G_BEGIN_DECLS

#define GST_TYPE_OP_MSG_SINK (gst_op_msg_sink_get_type())
G_DECLARE_FINAL_TYPE(GstOpMsgSink, gst_op_msg_sink, GST, OP_MSG_SINK, GstBaseSink)

// How logMonoTime is chosen.
typedef enum {
  GST_OP_MSG_SINK_TIMESTAMPS_CLOCK,   // the monotonic clock when the message is made (live)
  GST_OP_MSG_SINK_TIMESTAMPS_STREAM,  // the buffer's PTS (replays write the same bytes)
} GstOpMsgSinkTimestamps;

GST_ELEMENT_REGISTER_DECLARE(opmsgsink);

G_END_DECLS
