// A fixed set of reusable records for per-frame callback contexts (an event callback's
// `user_data`), so that the frame path does not allocate one per frame.
//
// Acquire takes a free record (any thread), Release returns it (typically from an OpenCL event
// callback). Only when every record is in flight (more than N frames queued on the device) does
// Acquire fall back to the heap; Release tells the two apart by address.
#pragma once

#include <array>
#include <cstddef>
#include <mutex>

namespace op {

template <typename T, size_t N>
class Slots {
 public:
  Slots() {
    for (size_t i = 0; i < N; i++)
      free_[i] = &records_[i];
    free_count_ = N;
  }
  Slots(const Slots &) = delete;
  Slots &operator=(const Slots &) = delete;

  // A record set to `value`.
  T *Acquire(const T &value) {
    {
      std::lock_guard<std::mutex> g(lock_);
      if (free_count_) {
        T *t = free_[--free_count_];
        *t = value;
        return t;
      }
    }
    return new T(value);  // more than N in flight: rare, and bounded by the device's queue
  }

  void Release(T *t) {
    if (t < records_.data() || t >= records_.data() + N) {
      delete t;
      return;
    }
    std::lock_guard<std::mutex> g(lock_);
    free_[free_count_++] = t;
  }

 private:
  std::mutex lock_;
  std::array<T, N> records_{};
  std::array<T *, N> free_{};
  size_t free_count_ = 0;
};

}  // namespace op
