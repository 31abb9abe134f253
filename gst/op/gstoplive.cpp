#include "op/gstoplive.h"

gboolean gst_op_upstream_is_live(GstPad *sinkpad) {
  GstQuery *query = gst_query_new_latency();
  gboolean live = FALSE;
  if (gst_pad_peer_query(sinkpad, query))
    gst_query_parse_latency(query, &live, nullptr, nullptr);
  gst_query_unref(query);
  return live;
}

void gst_op_post_qos_drop(GstElement *element, const GstSegment *segment, GstBuffer *buffer,
                          guint64 processed, guint64 dropped) {
  const GstClockTime pts = GST_BUFFER_PTS(buffer);
  GstClockTime running = GST_CLOCK_TIME_NONE, stream = GST_CLOCK_TIME_NONE;
  if (segment->format == GST_FORMAT_TIME && GST_CLOCK_TIME_IS_VALID(pts)) {
    running = gst_segment_to_running_time(segment, GST_FORMAT_TIME, pts);
    stream = gst_segment_to_stream_time(segment, GST_FORMAT_TIME, pts);
  }
  GstMessage *msg = gst_message_new_qos(GST_OBJECT(element), TRUE, running, stream, pts,
                                        GST_BUFFER_DURATION(buffer));
  gst_message_set_qos_stats(msg, GST_FORMAT_BUFFERS, processed, dropped);
  gst_element_post_message(element, msg);
}

// ---- GstOpFrameGate -----------------------------------------------------------------------

namespace {

// On a frame's output buffer: which gate and slot count it. Not copied by transforms (no tags
// and no transform function): it belongs to this buffer, and leaves with it, when the buffer is
// freed or returned to its pool (the pool removes metas that are not pooled).
struct FrameGateMeta {
  GstMeta meta;
  GstOpFrameGate *gate;
  int slot;
};

GType FrameGateMetaApi() {
  static GType type = 0;
  static const gchar *tags[] = {nullptr};
  if (g_once_init_enter(&type))
    g_once_init_leave(&type, gst_meta_api_type_register("GstOpFrameGateMetaAPI", tags));
  return type;
}

gboolean FrameGateMetaInit(GstMeta *meta, gpointer, GstBuffer *) {
  auto *m = reinterpret_cast<FrameGateMeta *>(meta);
  m->gate = nullptr;
  m->slot = -1;
  return TRUE;
}

void FrameGateMetaFree(GstMeta *meta, GstBuffer *) {
  auto *m = reinterpret_cast<FrameGateMeta *>(meta);
  if (!m->gate)
    return;
  m->gate->Released(m->slot);
  m->gate->Unref();
  m->gate = nullptr;
}

const GstMetaInfo *FrameGateMetaInfo() {
  static const GstMetaInfo *info = nullptr;
  if (g_once_init_enter(&info))
    g_once_init_leave(
        &info, gst_meta_register(FrameGateMetaApi(), "GstOpFrameGateMeta", sizeof(FrameGateMeta),
                                 FrameGateMetaInit, FrameGateMetaFree, nullptr));
  return info;
}

}  // namespace

void GstOpFrameGate::Ref() {
  refs_++;
}

void GstOpFrameGate::Unref() {
  if (--refs_ == 0)
    delete this;
}

GstOpFrameGate::~GstOpFrameGate() {
  for (Slot &s : slots_)
    if (s.marker)
      clReleaseEvent(s.marker);
  if (ctx_)
    gst_object_unref(ctx_);
}

bool GstOpFrameGate::Track(GstBuffer *buffer, GstOpContext *ctx) {
  int slot = -1;
  {
    std::lock_guard<std::mutex> guard(lock_);
    if (!ctx_)
      ctx_ = GST_OP_CONTEXT(gst_object_ref(ctx));
    for (int i = 0; i < kSlots && slot < 0; i++)
      if (!slots_[i].busy)
        slot = i;
    if (slot < 0)
      return false;
    Slot &s = slots_[slot];
    if (s.marker)
      clReleaseEvent(s.marker);
    s = Slot{true, false, nullptr};
  }
  auto *m =
      reinterpret_cast<FrameGateMeta *>(gst_buffer_add_meta(buffer, FrameGateMetaInfo(), nullptr));
  if (!m) {
    std::lock_guard<std::mutex> guard(lock_);
    slots_[slot].busy = false;
    return false;
  }
  Ref();
  m->gate = this;
  m->slot = slot;
  return true;
}

void GstOpFrameGate::Released(int slot) {
  if (slot < 0 || slot >= kSlots)
    return;
  // Everything enqueued so far, the consumer's work on this frame included, comes before the
  // marker on the in-order queue. A failed marker leaves the slot to finish at once.
  cl_event marker = nullptr;
  cl_command_queue queue = ctx_ ? gst_op_context_get_queue(ctx_).get() : nullptr;
  if (queue && clEnqueueMarkerWithWaitList(queue, 0, nullptr, &marker) == CL_SUCCESS)
    clFlush(queue);
  else
    marker = nullptr;
  std::lock_guard<std::mutex> guard(lock_);
  Slot &s = slots_[slot];
  s.released = true;
  s.marker = marker;
  if (!marker)
    s.busy = false;
}

int GstOpFrameGate::in_flight() {
  std::lock_guard<std::mutex> guard(lock_);
  int n = 0;
  for (Slot &s : slots_) {
    if (!s.busy)
      continue;
    if (s.released) {
      cl_int status = CL_COMPLETE;
      clGetEventInfo(s.marker, CL_EVENT_COMMAND_EXECUTION_STATUS, sizeof(status), &status, nullptr);
      // Complete, or failed (negative): either way the device is done with it.
      if (status <= CL_COMPLETE) {
        clReleaseEvent(s.marker);
        s = Slot{};
        continue;
      }
    }
    n++;
  }
  return n;
}
