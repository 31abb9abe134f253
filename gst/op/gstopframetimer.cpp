#include "op/gstopframetimer.h"

#include <chrono>
#include <cinttypes>
#include <cstdio>

// ---- timer ---------------------------------------------------------------------------

int64_t GstOpFrameTimer::Now() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

void GstOpFrameTimer::Track(cl_event done, int64_t start_ns, cl_event first, cl_event last) {
  if (!last)
    last = done;
  if (first)
    clRetainEvent(first);
  clRetainEvent(last);
  completions_.OnComplete(done, &GstOpFrameTimer::OnComplete,
                          frames_.Acquire(Frame{this, start_ns, first, last}));
}

void GstOpFrameTimer::OnComplete(void *data, cl_int status) {
  auto *frame = static_cast<Frame *>(data);
  GstOpFrameTimer *t = frame->timer;
  const int64_t end = Now();
  // Device time: every command of the frame has completed, so their profiling times are set
  // (on a queue without profiling the queries fail and only the first time is kept).
  const uint64_t ns = uint64_t(end > frame->start_ns ? end - frame->start_ns : 0);
  cl_ulong dev_start = 0, dev_end = 0;
  const bool device =
      status == CL_COMPLETE && frame->first &&
      clGetEventProfilingInfo(frame->first, CL_PROFILING_COMMAND_START, sizeof(dev_start),
                              &dev_start, nullptr) == CL_SUCCESS &&
      clGetEventProfilingInfo(frame->last, CL_PROFILING_COMMAND_END, sizeof(dev_end), &dev_end,
                              nullptr) == CL_SUCCESS &&
      dev_end >= dev_start;
  if (frame->first)
    clReleaseEvent(frame->first);
  clReleaseEvent(frame->last);
  {
    std::lock_guard<std::mutex> g(t->lock_);
    if (device) {
      t->stats_.device_frames++;
      t->stats_.device_total_ns += dev_end - dev_start;
      t->stats_.device_last_ns = dev_end - dev_start;
    }
    if (status == CL_COMPLETE) {
      t->stats_.frames++;
      t->stats_.total_ns += ns;
      t->stats_.last_ns = ns;
      if (ns > t->stats_.max_ns)
        t->stats_.max_ns = ns;
    }
  }
  if (status == CL_COMPLETE && t->latency_)
    t->latency_->NoteAndPost(t->element_, ns);
  t->frames_.Release(frame);
}

void GstOpFrameTimer::Reset() {
  std::lock_guard<std::mutex> g(lock_);
  stats_ = Stats();
}

GstOpFrameTimer::Stats GstOpFrameTimer::stats() const {
  std::lock_guard<std::mutex> g(lock_);
  return stats_;
}

std::string GstOpFrameTimer::Summary() const {
  const Stats s = stats();
  char line[200];
  std::snprintf(line, sizeof line,
                "%" PRIu64
                " frames: device time %.2f ms per frame; submission to completion "
                "%.2f ms per frame, longest %.2f ms",
                s.frames, s.device_mean_ns() / 1e6, s.mean_ns() / 1e6, s.max_ns / 1e6);
  return line;
}

// ---- properties ---------------------------------------------------------------------------

void gst_op_frame_timer_install_properties(GObjectClass *klass, guint first) {
  const auto ro = (GParamFlags)(G_PARAM_READABLE | G_PARAM_STATIC_STRINGS);
  g_object_class_install_property(
      klass, first,
      g_param_spec_double("mean-time", "Mean time",
                          "Mean time from submission to device completion per frame (ms)", 0,
                          G_MAXDOUBLE, 0, ro));
  g_object_class_install_property(
      klass, first + 1,
      g_param_spec_double("max-time", "Maximum time",
                          "Longest time from submission to device completion of a frame (ms)", 0,
                          G_MAXDOUBLE, 0, ro));
  g_object_class_install_property(
      klass, first + 2,
      g_param_spec_double("device-time", "Device time",
                          "Mean device time per frame, from the start of its first kernel to the "
                          "end of its last (ms; 0 where the queue has no profiling)",
                          0, G_MAXDOUBLE, 0, ro));
}

bool gst_op_frame_timer_get_property(const GstOpFrameTimer &timer, guint first, guint id,
                                     GValue *value) {
  if (id < first || id > first + 2)
    return false;
  const GstOpFrameTimer::Stats s = timer.stats();
  const double ns = id == first       ? s.mean_ns()
                    : id == first + 1 ? double(s.max_ns)
                                      : s.device_mean_ns();
  g_value_set_double(value, ns / 1e6);
  return true;
}
