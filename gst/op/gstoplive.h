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

// Two producers whose frames a consumer pairs (the road and wide warps feeding one opvision) are
// twins when their capture times are closer than this: openpilot's pairing window. Their cameras
// run at 20 Hz, 50 ms apart, and a pair is captured within a few milliseconds.
inline constexpr GstClockTime kGstOpTwinWindowNs = 25 * GST_MSECOND;

// The frames of one stream that are on the device. A frame counts from its admission (Admit(),
// at the top of the producer's transform) or its Track() until the device has finished every
// command enqueued before downstream released its buffers: the consumer enqueues its work for a
// frame before it lets go of the input, so this covers the networks that ran on it wherever
// they ran, and the in-order queue needs no callback from them. On release a marker is enqueued
// (and flushed); in_flight() and Admit() poll the markers' status, so nothing waits and nothing
// is allocated per frame.
//
// One gate may serve several producers: a consumer that pairs frames (opvision, road and wide)
// hands its gate to both warps (gst_op_frame_gate_query_peer()), and a pair of twins is then one
// frame on the device: admitted or dropped together. Otherwise each producing element has its
// own.
//
// Reference counted (each tracked buffer's meta holds one), so a buffer released after its
// element is gone is still safe.
class GstOpFrameGate {
 public:
  static GstOpFrameGate *New() { return new GstOpFrameGate(); }
  void Ref();
  void Unref();

  // Registers a producer of frames; its index for Admit().
  int AddProducer();
  // Whether the frame of `producer` captured at `time` (running time; NONE: unknown) goes onto
  // the device. A twin of a frame another producer already decided on (within
  // kGstOpTwinWindowNs) follows that decision and shares its slot; any other frame is admitted
  // while fewer than `max_in_flight` frames are on the device. A twin whose partner the
  // consumer took already (alone) is dropped: nothing would pair with it. Returns the slot
  // to pass to Track(), or -1: drop the frame. An admitted frame counts from here; Cancel() gives
  // the slot back when the producer could not make the frame after all.
  int Admit(int producer, GstClockTime time, int max_in_flight);
  void Cancel(int slot);
  // Counts `buffer` as (part of) the frame in `slot` (from Admit(); -1: a frame of its own) on
  // the device of `ctx` (always the same context: the gate keeps a reference to it, so an
  // element makes a new gate for each start). FALSE when the buffer is not counted: no slot was
  // given and kSlots frames are tracked already.
  bool Track(GstBuffer *buffer, GstOpContext *ctx, int slot = -1);
  // Counts `buffer` as part of the frame tracked in `slot`, which a buffer of it still holds
  // (gst_op_frame_gate_forward()).
  bool Forward(GstBuffer *buffer, int slot);
  // Frames admitted or tracked and not finished yet.
  int in_flight();

  // Called when a buffer tracked in `slot` is released (its meta is freed): enqueues the
  // marker that says when the device is done with what was enqueued for the frame.
  void Released(int slot);

  static constexpr int kSlots = 16;

 private:
  struct Slot {
    bool busy = false;          // admitted or tracked, not yet finished
    int admitted = 0;           // admissions not tracked (or cancelled) yet
    int buffers = 0;            // tracked buffers not released yet
    bool released = false;      // one was: the consumer took the frame
    cl_event marker = nullptr;  // the last release's: the device is done once it completes
    guint64 generation = 0;     // bumped each time the slot is taken
  };
  // The last decisions, for the twins that follow them.
  struct Decision {
    GstClockTime time = GST_CLOCK_TIME_NONE;
    int producer = -1;
    guint followed = 0;  // producers (bits) that followed it
    int slot = -1;       // -1: dropped
    guint64 generation = 0;
  };
  // Enough for one producer to lag kDecisions / 2 frames behind another (1.6 s at 20 Hz) and
  // still find its twin's decision.
  static constexpr int kDecisions = 64;

  GstOpFrameGate() { last_time_.fill(GST_CLOCK_TIME_NONE); }
  ~GstOpFrameGate();
  // Frees the slots whose frames are done; the number still busy. Caller holds lock_.
  int PollLocked();
  // A free slot, taken; -1 when all are busy. Caller holds lock_.
  int TakeLocked();
  void RecordLocked(GstClockTime time, int producer, int slot);
  // Adds the buffer to `slot` (taking the admission if `admitted`) and gives it the meta.
  bool AddBuffer(GstBuffer *buffer, int slot, bool admitted);

  std::atomic<int> refs_{1};
  std::mutex lock_;
  std::array<Slot, kSlots> slots_{};
  std::array<Decision, kDecisions> decisions_{};
  int next_decision_ = 0;
  // The latest capture time of a decision overwritten before every producer followed it.
  GstClockTime forgotten_ = GST_CLOCK_TIME_NONE;
  // Each producer's last capture time: one going back (a flush or seek restarts running time)
  // drops the decisions made before it, or every later frame would look older than forgotten_.
  std::array<GstClockTime, 32> last_time_;
  int producers_ = 0;
  GstOpContext *ctx_ = nullptr;  // a reference, taken by the first Track()
};

// A network whose output goes on to another network (opvision's vision-only model feeding
// oppolicy) counts `to`, its output for the frame in `from`, as part of the same frame: the frame
// then stays on the device until the next network released `to` too, after enqueuing its work.
// FALSE when `from` is not a tracked frame (not live, or beyond the table).
gboolean gst_op_frame_gate_forward(GstBuffer *from, GstBuffer *to);

// A consumer that pairs its inputs answers this custom query from its sink pads with its gate,
// so that the producers upstream drop twins together (see GstOpFrameGate).
// Consumer side: TRUE if `query` is that query (then answered with a reference to `gate`).
gboolean gst_op_frame_gate_query_answer(GstQuery *query, GstOpFrameGate *gate);
// Producer side: the gate of the consumer downstream of `srcpad` (a new reference), or null when
// none answers.
GstOpFrameGate *gst_op_frame_gate_query_peer(GstPad *srcpad);
