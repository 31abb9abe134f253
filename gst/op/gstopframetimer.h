// GstOpFrameTimer: how long an OpenCL element's frames take, measured without host waits.
#pragma once

#include <gst/gst.h>

#include <cstdint>
#include <mutex>
#include <string>

#include "cl/cl.h"
#include "op/gstopkeepalive.h"
#include "op/gstoplatency.h"
#include "op/gstopslots.h"

// Two times per frame, both read in the completion callback of the frame's last event (the
// streaming thread never waits): from submission to completion, which includes waiting behind
// work queued earlier (what latency is made of), and the device time, from the start of the
// frame's first kernel to the end of its last (profiling events; what the stage costs).
class GstOpFrameTimer {
 public:
  struct Stats {
    uint64_t frames = 0;  // frames whose completion was seen
    uint64_t total_ns = 0;
    uint64_t max_ns = 0;
    uint64_t last_ns = 0;
    uint64_t device_frames = 0;  // frames with profiling information
    uint64_t device_total_ns = 0;
    uint64_t device_last_ns = 0;
    double mean_ns() const { return frames ? double(total_ns) / double(frames) : 0.0; }
    double device_mean_ns() const {
      return device_frames ? double(device_total_ns) / double(device_frames) : 0.0;
    }
    // The stage time for GstOpFrameMeta: device time where the queue profiles, else the
    // submission-to-completion time.
    uint64_t stage_ns() const { return device_frames ? device_last_ns : last_ns; }
  };

  // Starts timing a frame submitted at `start_ns` (Now()) that completes with `done`; its
  // device time runs from the start of `first` to the end of `last` (`done` when null). The
  // completion runs through a GstOpKeepAlive, so more than GstOpKeepAlive::kSlots frames in
  // flight (never with bounded pools) make this wait for `done`.
  void Track(cl_event done, int64_t start_ns, cl_event first = nullptr, cl_event last = nullptr);
  // Also announces each completed frame's submission-to-completion time to `latency`, posting
  // from `element` in the completion callback (opwarp: the pipeline hears of a slower frame as
  // soon as it is done). Set once, before the first Track().
  void ReportTo(GstOpLatencyReporter *latency, GstElement *element) {
    latency_ = latency;
    element_ = element;
  }
  // Waits for every tracked completion callback (stop(), after the queue finished).
  void Drain() { completions_.Drain(); }
  void Reset();
  Stats stats() const;
  // One line for the elements' log at stop: frames, mean device time, mean and longest time
  // from submission to completion.
  std::string Summary() const;
  static int64_t Now();

 private:
  struct Frame {
    GstOpFrameTimer *timer = nullptr;
    int64_t start_ns = 0;
    cl_event first = nullptr;  // retained until the frame completed
    cl_event last = nullptr;
  };
  static void OnComplete(void *frame, cl_int status);

  mutable std::mutex lock_;  // guards stats_
  Stats stats_;
  GstOpLatencyReporter *latency_ = nullptr;
  GstElement *element_ = nullptr;
  // Declared before completions_, so they outlive its destructor, which drains the callbacks
  // that give them back.
  op::Slots<Frame, GstOpKeepAlive::kSlots> frames_;
  GstOpKeepAlive completions_;
};

// The frame timer's read-only properties of an element, at ids `first` (mean-time),
// first + 1 (max-time) and first + 2 (device-time), all in milliseconds.
void gst_op_frame_timer_install_properties(GObjectClass *klass, guint first);
// For get_property: TRUE when `id` is one of them and `value` was set from `timer`.
bool gst_op_frame_timer_get_property(const GstOpFrameTimer &timer, guint first, guint id,
                                     GValue *value);
