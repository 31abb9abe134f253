// Live pipelines: whether upstream is live, how many frames may be on the device at once, and
// the QoS message of a frame dropped because the device has no room for it (see
// docs/memory-and-sync.md, "Live sources: at most two frames on the device").
#pragma once

#include <gst/gst.h>

#include <array>
#include <atomic>
#include <mutex>

#include "cl/cl.h"
#include "op/gstopcontext.h"

// With a live source, at most this many frames of one stream are on the device at once: one
// whose networks run and one waiting behind it. A newer frame is dropped before any device work.
inline constexpr guint kGstOpMaxFramesInFlight = 2;

// Asks upstream of `sinkpad` for its latency: TRUE when upstream answers and is live.
gboolean gst_op_upstream_is_live(GstPad *sinkpad);

// Posts the QoS message of `buffer`, dropped before any device work: its timestamps (running
// and stream time in `segment`, a time segment; others leave them unknown) and the element's
// counts so far, in buffers.
void gst_op_post_qos_drop(GstElement *element, const GstSegment *segment, GstBuffer *buffer,
                          guint64 processed, guint64 dropped);

// The frames of one stream that are on the device. A frame counts from its Track() (the
// producer's output, before the push) until the device has finished every command enqueued
// before downstream released that buffer: the consumer enqueues its work for a frame before it
// lets go of the input, so this covers the networks that ran on it wherever they ran, and the
// in-order queue needs no callback from them. On release a marker is enqueued (and flushed);
// in_flight() polls the markers' status, so nothing waits and nothing is allocated per frame.
//
// Reference counted (each tracked buffer's meta holds one), so a buffer released after its
// element is gone is still safe. One per producing element.
class GstOpFrameGate {
 public:
  static GstOpFrameGate *New() { return new GstOpFrameGate(); }
  void Ref();
  void Unref();
  // Counts `buffer` as a frame on the device of `ctx` (always the same context: the gate keeps a
  // reference to it, so an element makes a new gate for each start). FALSE
  // when kSlots frames are tracked already: the frame is then not counted.
  bool Track(GstBuffer *buffer, GstOpContext *ctx);
  // Frames tracked and not finished yet.
  int in_flight();

  // Called when the buffer tracked in `slot` is released (its meta is freed): enqueues the
  // marker that says when the device is done with what was enqueued for the frame.
  void Released(int slot);

  static constexpr int kSlots = 16;

 private:
  struct Slot {
    bool busy = false;      // tracked, not yet finished
    bool released = false;  // downstream let go: `marker` says when the device is done
    cl_event marker = nullptr;
  };
  GstOpFrameGate() = default;
  ~GstOpFrameGate();

  std::atomic<int> refs_{1};
  std::mutex lock_;
  std::array<Slot, kSlots> slots_{};
  GstOpContext *ctx_ = nullptr;  // a reference, taken by the first Track()
};
