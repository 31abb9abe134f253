// opwarp: NV12 camera frames → openpilot model-input tensors (1,12,128,256) uint8, on the device.
#pragma once

#include "op/gstopbasefilter.h"

G_BEGIN_DECLS

#define GST_TYPE_OP_WARP (gst_op_warp_get_type())
G_DECLARE_FINAL_TYPE(GstOpWarp, gst_op_warp, GST, OP_WARP, GstOpBaseFilter)

GST_ELEMENT_REGISTER_DECLARE(opwarp);

// The calibration event: a serialized custom downstream event (GST_EVENT_CUSTOM_DOWNSTREAM)
// whose structure is named "op-calibration" with the double fields "roll", "pitch" and "yaw"
// (radians, openpilot's liveCalibration.rpyCalib). opwarp applies it from the next frame on,
// exactly like setting its `rpy` property, and passes it downstream. Replays that read the
// calibration from a log send it in stream order with the frames.
#define GST_OP_CALIBRATION_EVENT_NAME "op-calibration"

// A new calibration event. (transfer full)
GstEvent *gst_op_calibration_event_new(gdouble roll, gdouble pitch, gdouble yaw);
// Reads a calibration event; FALSE for any other event or missing/non-finite fields.
gboolean gst_op_calibration_event_parse(GstEvent *event, gdouble *roll, gdouble *pitch,
                                        gdouble *yaw);

G_END_DECLS
