// GstOpLatencyReporter: the processing latency an OpenCL element adds, with one rule for when to
// announce it. Frames report their time (from submission or arrival to completion on the
// device, usually from a completion callback); latency queries add the longest time measured;
// a measurement more than a quarter above what was last announced is announced again, so the
// pipeline recomputes its latency a few times while the device warms up, not once per frame.
// Elements time their frames with GstOpFrameTimer (gstopframetimer.h), which feeds it here from
// the completion (GstOpFrameTimer::ReportTo) or through stats().max_ns.
#pragma once

#include <gst/gst.h>

#include <atomic>

// A read-only guint64 counter property (frames, drops…) of an element's statistics.
void gst_op_install_stat(GObjectClass *klass, guint id, const char *name, const char *blurb);

class GstOpLatencyReporter {
 public:
  // Any thread: a frame took `ns`. Returns TRUE when the element should announce the new
  // latency (the caller posts a LATENCY message, or an aggregator calls set_latency).
  bool Note(GstClockTime ns);
  // Note(), and posts the LATENCY message from `element` when it is due.
  void NoteAndPost(GstElement *element, GstClockTime ns);
  // The longest time measured so far: what latency queries add.
  GstClockTime max() const { return max_.load(); }
  // What may be added to the maximum: a live pipeline keeps up to kGstOpMaxFramesInFlight
  // frames on the device, so a frame may wait for one other frame's processing.
  GstClockTime max_in_flight() const;
  // For a latency query answered upstream first (its live flag kept): adds max() to its minimum
  // and max_in_flight() to its (valid) maximum.
  void AddTo(GstQuery *query) const;
  void Reset();

 private:
  std::atomic<GstClockTime> max_{0};
  std::atomic<GstClockTime> announced_{0};
};
