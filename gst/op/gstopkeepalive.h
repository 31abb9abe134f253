// GstOpKeepAlive: host work that has to wait until the device is done with something — give
// back an input buffer a write still reads, note when a frame's output completed — run from the
// OpenCL completion callback, so the streaming thread never waits, and one Drain() at stop that
// waits for all of it (see docs/memory-and-sync.md, "Keeping host memory alive").
//
// One per element (or per GstOpUploader). Any thread may call OnComplete; the work runs on a
// driver thread. The caller flushes the queue (or lets the next flush do it) so the events
// complete; Drain() flushes nothing by itself.
#pragma once

#include "cl/cl.h"

#include <array>
#include <condition_variable>
#include <cstddef>
#include <mutex>

class GstOpKeepAlive {
 public:
  // `status` is CL_COMPLETE, or the negative error the command ended with.
  using Fn = void (*)(void *data, cl_int status);

  GstOpKeepAlive() = default;
  GstOpKeepAlive(const GstOpKeepAlive &) = delete;
  GstOpKeepAlive &operator=(const GstOpKeepAlive &) = delete;
  ~GstOpKeepAlive() { Drain(); }

  // Calls fn(data, status) once, when `event` completes. Allocates nothing: a fixed table holds
  // kSlots registrations; when it is full (the device is far behind), or when the driver refuses
  // the callback, this waits for `event` and calls fn before it returns.
  void OnComplete(cl_event event, Fn fn, void *data);
  // Waits until every fn registered so far has run (stop(), after the queue was flushed).
  void Drain();
  // Registrations whose fn has not run yet.
  int in_flight() const;

  static constexpr size_t kSlots = 64;

 private:
  struct Slot {
    GstOpKeepAlive *owner = nullptr;
    Fn fn = nullptr;
    void *data = nullptr;
    bool busy = false;
  };
  static void CL_CALLBACK Done(cl_event event, cl_int status, void *slot);

  mutable std::mutex lock_;
  std::condition_variable idle_;
  std::array<Slot, kSlots> slots_{};
  size_t next_ = 0;
  int in_flight_ = 0;
};
