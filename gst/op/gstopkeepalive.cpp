#include "op/gstopkeepalive.h"

void GstOpKeepAlive::OnComplete(cl_event event, Fn fn, void *data) {
  Slot *slot = nullptr;
  {
    std::lock_guard<std::mutex> guard(lock_);
    for (size_t i = 0; i < kSlots && !slot; i++) {
      Slot &s = slots_[(next_ + i) % kSlots];
      if (!s.busy) {
        slot = &s;
        next_ = (next_ + i + 1) % kSlots;
      }
    }
    if (slot) {
      *slot = Slot{this, fn, data, true};
      in_flight_++;
    }
  }
  if (slot && clSetEventCallback(event, CL_COMPLETE, Done, slot) == CL_SUCCESS)
    return;
  // No slot (kSlots registrations in flight) or no callback: the only safe time to run fn is
  // after the event, so wait for it here. Bounded pools keep this off the frame path.
  cl_int status = clWaitForEvents(1, &event);
  if (status == CL_SUCCESS)
    clGetEventInfo(event, CL_EVENT_COMMAND_EXECUTION_STATUS, sizeof(status), &status, nullptr);
  if (slot) {
    Done(event, status, slot);
    return;
  }
  fn(data, status);
}

void CL_CALLBACK GstOpKeepAlive::Done(cl_event, cl_int status, void *data) {
  auto *slot = static_cast<Slot *>(data);
  GstOpKeepAlive *self = slot->owner;
  slot->fn(slot->data, status);
  std::lock_guard<std::mutex> guard(self->lock_);
  slot->busy = false;
  if (--self->in_flight_ == 0)
    self->idle_.notify_all();
}

void GstOpKeepAlive::Drain() {
  std::unique_lock<std::mutex> guard(lock_);
  idle_.wait(guard, [&] { return in_flight_ == 0; });
}

int GstOpKeepAlive::in_flight() const {
  std::lock_guard<std::mutex> guard(lock_);
  return in_flight_;
}
