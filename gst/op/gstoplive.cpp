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

int GstOpFrameGate::AddProducer() {
  std::lock_guard<std::mutex> guard(lock_);
  return producers_++;
}

int GstOpFrameGate::PollLocked() {
  int n = 0;
  for (Slot &s : slots_) {
    if (!s.busy)
      continue;
    if (s.admitted == 0 && s.buffers == 0) {
      cl_int status = CL_COMPLETE;
      if (s.marker)
        clGetEventInfo(s.marker, CL_EVENT_COMMAND_EXECUTION_STATUS, sizeof(status), &status,
                       nullptr);
      // Complete, or failed (negative): either way the device is done with it.
      if (status <= CL_COMPLETE) {
        if (s.marker)
          clReleaseEvent(s.marker);
        s.marker = nullptr;
        s.busy = false;
        continue;
      }
    }
    n++;
  }
  return n;
}

int GstOpFrameGate::TakeLocked() {
  for (int i = 0; i < kSlots; i++) {
    Slot &s = slots_[i];
    if (s.busy)
      continue;
    if (s.marker)
      clReleaseEvent(s.marker);
    const guint64 generation = s.generation + 1;
    s = Slot{};
    s.busy = true;
    s.generation = generation;
    return i;
  }
  return -1;
}

void GstOpFrameGate::RecordLocked(GstClockTime time, int producer, int slot) {
  if (!GST_CLOCK_TIME_IS_VALID(time) || producers_ < 2)
    return;
  Decision &d = decisions_[next_decision_];
  next_decision_ = (next_decision_ + 1) % kDecisions;
  // A decision some producer has not followed yet is forgotten: remember how late it was.
  if (d.producer >= 0 && __builtin_popcount(d.followed) < producers_ - 1 &&
      (!GST_CLOCK_TIME_IS_VALID(forgotten_) || d.time > forgotten_))
    forgotten_ = d.time;
  d = Decision{time, producer, 0u, slot, slot >= 0 ? slots_[slot].generation : 0};
}

int GstOpFrameGate::Admit(int producer, GstClockTime time, int max_in_flight) {
  std::lock_guard<std::mutex> guard(lock_);
  const int busy = PollLocked();
  if (GST_CLOCK_TIME_IS_VALID(time) && producers_ > 1 && producer >= 0 && producer < 32) {
    GstClockTime &last = last_time_[static_cast<size_t>(producer)];
    if (GST_CLOCK_TIME_IS_VALID(last) && time < last) {
      // Decisions from before the restart go; one another producer made after it stays.
      for (Decision &d : decisions_)
        if (d.producer >= 0 && d.time >= time + kGstOpTwinWindowNs)
          d = Decision{};
      forgotten_ = GST_CLOCK_TIME_NONE;
    }
    last = time;
    // The newest decision of another producer on a twin of this frame, not followed yet.
    for (int k = 1; k <= kDecisions; k++) {
      Decision &d = decisions_[(next_decision_ - k + kDecisions) % kDecisions];
      if (d.producer < 0 || d.producer == producer || (d.followed & (1u << producer)))
        continue;
      const GstClockTime gap = d.time > time ? d.time - time : time - d.time;
      if (gap >= kGstOpTwinWindowNs)
        continue;
      d.followed |= 1u << producer;
      if (d.slot < 0)
        return -1;  // its twin was dropped: alone it would be wasted work
      Slot &s = slots_[d.slot];
      if (s.busy && s.generation == d.generation && !s.released) {
        s.admitted++;
        return d.slot;
      }
      // The consumer took the twin already, without this frame (ran it alone at a live
      // deadline, or left it out): this one could only be passed over there.
      return -1;
    }
    // No twin decided within the last kDecisions: when this producer lags so far behind that
    // its twin's decision may have been forgotten, the twin may have been dropped, and a frame
    // admitted alone would then wait on the device for nothing. Dropped, not recorded.
    if (GST_CLOCK_TIME_IS_VALID(forgotten_) && time < forgotten_ + kGstOpTwinWindowNs)
      return -1;
  }
  const int slot = busy < max_in_flight ? TakeLocked() : -1;
  if (slot >= 0)
    slots_[slot].admitted = 1;
  RecordLocked(time, producer, slot);
  return slot;
}

void GstOpFrameGate::Cancel(int slot) {
  if (slot < 0 || slot >= kSlots)
    return;
  std::lock_guard<std::mutex> guard(lock_);
  if (slots_[slot].admitted > 0)
    slots_[slot].admitted--;
}

bool GstOpFrameGate::Track(GstBuffer *buffer, GstOpContext *ctx, int slot) {
  {
    std::lock_guard<std::mutex> guard(lock_);
    if (!ctx_)
      ctx_ = GST_OP_CONTEXT(gst_object_ref(ctx));
    if (slot < 0 || slot >= kSlots) {
      slot = TakeLocked();
      if (slot < 0)
        return false;
      slots_[slot].admitted = 1;
    }
  }
  return AddBuffer(buffer, slot, true);
}

bool GstOpFrameGate::Forward(GstBuffer *buffer, int slot) {
  return slot >= 0 && slot < kSlots && AddBuffer(buffer, slot, false);
}

bool GstOpFrameGate::AddBuffer(GstBuffer *buffer, int slot, bool admitted) {
  {
    std::lock_guard<std::mutex> guard(lock_);
    Slot &s = slots_[slot];
    if (admitted && s.admitted > 0)
      s.admitted--;
    s.buffers++;
  }
  auto *m =
      reinterpret_cast<FrameGateMeta *>(gst_buffer_add_meta(buffer, FrameGateMetaInfo(), nullptr));
  if (!m) {
    std::lock_guard<std::mutex> guard(lock_);
    slots_[slot].buffers--;
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
  // marker on the in-order queue. Without a marker (it failed) the device is taken as done.
  cl_event marker = nullptr;
  cl_command_queue queue = ctx_ ? gst_op_context_get_queue(ctx_).get() : nullptr;
  if (queue && clEnqueueMarkerWithWaitList(queue, 0, nullptr, &marker) == CL_SUCCESS)
    clFlush(queue);
  else
    marker = nullptr;
  std::lock_guard<std::mutex> guard(lock_);
  Slot &s = slots_[slot];
  if (s.buffers > 0)
    s.buffers--;
  s.released = true;
  // On the in-order queue the newest marker comes after the older ones.
  if (s.marker)
    clReleaseEvent(s.marker);
  s.marker = marker;
}

int GstOpFrameGate::in_flight() {
  std::lock_guard<std::mutex> guard(lock_);
  return PollLocked();
}

gboolean gst_op_frame_gate_forward(GstBuffer *from, GstBuffer *to) {
  auto *m = reinterpret_cast<FrameGateMeta *>(gst_buffer_get_meta(from, FrameGateMetaApi()));
  // `from` is still held, and with it the slot: the frame cannot end meanwhile.
  return m && m->gate && m->gate->Forward(to, m->slot);
}

// ---- The gate query -------------------------------------------------------------------------

namespace {
constexpr const char *kFrameGateQuery = "op-frame-gate";
}

gboolean gst_op_frame_gate_query_answer(GstQuery *query, GstOpFrameGate *gate) {
  if (GST_QUERY_TYPE(query) != GST_QUERY_CUSTOM || !gate)
    return FALSE;
  GstStructure *s = gst_query_writable_structure(query);
  if (!s || !gst_structure_has_name(s, kFrameGateQuery))
    return FALSE;
  // A reference for the asker, which takes it over.
  gate->Ref();
  gst_structure_set(s, "gate", G_TYPE_POINTER, gate, nullptr);
  return TRUE;
}

GstOpFrameGate *gst_op_frame_gate_query_peer(GstPad *srcpad) {
  GstQuery *query =
      gst_query_new_custom(GST_QUERY_CUSTOM, gst_structure_new_empty(kFrameGateQuery));
  GstOpFrameGate *gate = nullptr;
  gpointer answer = nullptr;
  if (gst_pad_peer_query(srcpad, query) &&
      gst_structure_get(gst_query_get_structure(query), "gate", G_TYPE_POINTER, &answer, nullptr) &&
      answer) {
    gate = static_cast<GstOpFrameGate *>(answer);
  }
  gst_query_unref(query);
  return gate;
}
