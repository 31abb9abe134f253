// A small pool of worker threads for start-up work (building OpenCL programs), never used on the
// frame path.
//
// ParallelFor runs fn(0..n-1) on the workers and the calling thread and returns when every call
// has returned; as the caller takes part, a pool without workers runs everything in order on
// the caller. ThreadPool::Shared() is the process's pool for program builds: together with the
// caller, as many threads as the machine has hardware threads, or GST_OP_BUILD_THREADS (1: the
// calling thread alone).
#pragma once

#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace op::cl {

class ThreadPool {
 public:
  explicit ThreadPool(int workers);  // 0: the caller of ParallelFor does all the work
  ~ThreadPool();
  ThreadPool(const ThreadPool &) = delete;
  ThreadPool &operator=(const ThreadPool &) = delete;

  int workers() const { return static_cast<int>(workers_.size()); }

  // Runs fn(i) for every i in [0, n), on the workers and the calling thread.
  void ParallelFor(size_t n, const std::function<void(size_t)> &fn);

  static ThreadPool &Shared();
  // GST_OP_BUILD_THREADS when set to a positive number, else the hardware threads (at least 1).
  static int DefaultThreads();

 private:
  void Work();

  std::mutex lock_;
  std::condition_variable wake_;
  std::deque<std::function<void()>> jobs_;
  bool stop_ = false;
  std::vector<std::thread> workers_;
};

}  // namespace op::cl
