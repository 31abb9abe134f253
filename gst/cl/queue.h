// An in-order command queue where every enqueue returns the event of that command.
//
// Consumers pass producers' events in an EventList instead of waiting on the host; the only
// host waits are Event::Wait() and Finish(), which callers on the frame path must justify.
#pragma once

#include <cstddef>
#include <memory>

#include "handle.h"

namespace op::cl {

class Device;

// A non-owning list of events to wait for, with inline storage: building one never allocates.
class EventList {
 public:
  static constexpr size_t kMax = 16;
  EventList() = default;
  EventList(std::initializer_list<cl_event> events) {
    for (cl_event e : events)
      Add(e);
  }
  // Adds an event; null events and duplicates are skipped. Returns false when full.
  bool Add(cl_event e) {
    if (!e)
      return true;
    for (size_t i = 0; i < n_; i++)
      if (ev_[i] == e)
        return true;
    if (n_ == kMax)
      return false;
    ev_[n_++] = e;
    return true;
  }
  cl_uint size() const { return static_cast<cl_uint>(n_); }
  const cl_event *data() const { return n_ ? ev_ : nullptr; }
  bool empty() const { return n_ == 0; }

 private:
  cl_event ev_[kMax] = {};
  size_t n_ = 0;
};

// Blocks the calling thread until `event` completes; reports a failed command as an error.
Status WaitForEvent(cl_event event);
// Waits for all events of the list.
Status WaitForEvents(const EventList &events);

class Queue {
 public:
  // `profiling` enables CL_QUEUE_PROFILING_ENABLE (benchmarks and stage timing).
  static StatusOr<Queue> Create(const Device &device, bool profiling = false);
  Queue() = default;

  cl_command_queue get() const { return queue_.get(); }
  explicit operator bool() const { return static_cast<bool>(queue_); }

  // Non-blocking transfers: `host` must stay valid until the returned event completes.
  StatusOr<EventHandle> Write(cl_mem dst, size_t offset, size_t bytes, const void *host,
                              const EventList &wait = {});
  StatusOr<EventHandle> Read(cl_mem src, size_t offset, size_t bytes, void *host,
                             const EventList &wait = {});
  StatusOr<EventHandle> Copy(cl_mem src, size_t src_offset, cl_mem dst, size_t dst_offset,
                             size_t bytes, const EventList &wait = {});
  // 2D copies: `rows` rows of `row_bytes`, each side with its own offset and pitch.
  StatusOr<EventHandle> WriteRect(cl_mem dst, size_t dst_offset, size_t dst_pitch, const void *host,
                                  size_t host_pitch, size_t row_bytes, size_t rows,
                                  const EventList &wait = {});
  StatusOr<EventHandle> ReadRect(cl_mem src, size_t src_offset, size_t src_pitch, void *host,
                                 size_t host_pitch, size_t row_bytes, size_t rows,
                                 const EventList &wait = {});
  StatusOr<EventHandle> CopyRect(cl_mem src, size_t src_offset, size_t src_pitch, cl_mem dst,
                                 size_t dst_offset, size_t dst_pitch, size_t row_bytes, size_t rows,
                                 const EventList &wait = {});
  StatusOr<EventHandle> Fill(cl_mem dst, size_t offset, size_t bytes, uint8_t value,
                             const EventList &wait = {});
  // Launches `kernel` over `dims` dimensions; `local` may be null (the driver chooses).
  StatusOr<EventHandle> Launch(cl_kernel kernel, cl_uint dims, const size_t *global,
                               const size_t *local, const EventList &wait = {});
  // The same without an event, for a launch in the middle of an in-order run that nobody waits
  // on: the driver creates and releases no event object for it.
  Status LaunchQuiet(cl_kernel kernel, cl_uint dims, const size_t *global, const size_t *local,
                     const EventList &wait = {});
  // Maps a buffer region; the returned pointer is valid once the event completes (or at once
  // with `blocking`). Unmap returns the event after which the device may use the buffer again.
  StatusOr<void *> Map(cl_mem mem, cl_map_flags flags, size_t offset, size_t bytes, bool blocking,
                       const EventList &wait = {}, EventHandle *done = nullptr);
  StatusOr<EventHandle> Unmap(cl_mem mem, void *ptr, const EventList &wait = {});
  // An event that completes when everything in `wait` (or everything enqueued) has.
  StatusOr<EventHandle> Marker(const EventList &wait = {});

  Status Flush();
  Status Finish();

 private:
  QueueHandle queue_;
};

// Nanoseconds between the start and end of a command on a profiling queue, or -1.
int64_t EventDurationNs(cl_event event);

}  // namespace op::cl
