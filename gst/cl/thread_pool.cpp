#include "thread_pool.h"

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <memory>

namespace op::cl {

ThreadPool::ThreadPool(int threads) {
  for (int i = 0; i < threads; i++)
    workers_.emplace_back([this] { Work(); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> g(lock_);
    stop_ = true;
  }
  wake_.notify_all();
  for (std::thread &t : workers_)
    t.join();
}

void ThreadPool::Work() {
  for (;;) {
    std::function<void()> job;
    {
      std::unique_lock<std::mutex> g(lock_);
      wake_.wait(g, [this] { return stop_ || !jobs_.empty(); });
      if (jobs_.empty())
        return;  // stopping and nothing left
      job = std::move(jobs_.front());
      jobs_.pop_front();
    }
    job();
  }
}

void ThreadPool::ParallelFor(size_t n, const std::function<void(size_t)> &fn) {
  if (n == 0)
    return;
  // Shared by the helpers and this thread: the next index to take, and how many are finished.
  struct State {
    std::atomic<size_t> next{0};
    size_t finished = 0;
    std::mutex lock;
    std::condition_variable done;
  };
  auto state = std::make_shared<State>();
  auto drain = [state, n, &fn] {
    size_t mine = 0;
    for (size_t i; (i = state->next.fetch_add(1)) < n; mine++)
      fn(i);
    if (mine) {
      std::lock_guard<std::mutex> g(state->lock);
      state->finished += mine;
      if (state->finished == n)
        state->done.notify_all();
    }
  };
  // A helper that starts after every index is taken returns at once without touching `fn`.
  size_t helpers = std::min(n - 1, workers_.size());
  {
    std::lock_guard<std::mutex> g(lock_);
    for (size_t h = 0; h < helpers; h++)
      jobs_.push_back(drain);
  }
  wake_.notify_all();
  drain();
  std::unique_lock<std::mutex> g(state->lock);
  state->done.wait(g, [&] { return state->finished == n; });
}

int ThreadPool::DefaultThreads() {
  const char *env = std::getenv("GST_OP_BUILD_THREADS");
  if (env && *env) {
    int n = std::atoi(env);
    if (n > 0)
      return n;
  }
  return std::max(1u, std::thread::hardware_concurrency());
}

ThreadPool &ThreadPool::Shared() {
  // Never destroyed: workers must not be joined during static destruction, when a plugin may
  // already be unloaded.
  static ThreadPool *pool = new ThreadPool(DefaultThreads() - 1);  // the caller is one more
  return *pool;
}

}  // namespace op::cl
