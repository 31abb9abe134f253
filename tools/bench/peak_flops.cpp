// Measures the machine's peak fp32 FMA throughput, the ceiling the network benchmark compares
// our GFLOP/s against. Each thread runs a loop with enough independent accumulators to hide the
// FMA latency (latency 4 x 2 ports = 8 chains in flight at least; 12 measured 20% short of the
// peak here, 16 reach it, 24 spill), AVX-512 when the CPU has it, else AVX2+FMA.
//   peak_flops [--threads N] [--seconds S]     prints GFLOP/s for 1..N threads
#include <immintrin.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

namespace {

constexpr int kChains = 16;
constexpr long kInner = 1 << 14;

__attribute__((target("avx512f"))) double RunAvx512(long iters) {
  __m512 acc[kChains];
  for (int i = 0; i < kChains; i++)
    acc[i] = _mm512_set1_ps(0.001f * (i + 1));
  const __m512 a = _mm512_set1_ps(0.999999f), b = _mm512_set1_ps(1e-7f);
  for (long it = 0; it < iters; it++)
    for (long k = 0; k < kInner; k++)
#pragma GCC unroll 16
      for (int i = 0; i < kChains; i++)
        acc[i] = _mm512_fmadd_ps(acc[i], a, b);
  __m512 s = acc[0];
  for (int i = 1; i < kChains; i++)
    s = _mm512_add_ps(s, acc[i]);
  alignas(64) float out[16];
  _mm512_store_ps(out, s);
  return out[0];  // keeps the loop alive
}

__attribute__((target("avx2,fma"))) double RunAvx2(long iters) {
  __m256 acc[kChains];
  for (int i = 0; i < kChains; i++)
    acc[i] = _mm256_set1_ps(0.001f * (i + 1));
  const __m256 a = _mm256_set1_ps(0.999999f), b = _mm256_set1_ps(1e-7f);
  for (long it = 0; it < iters; it++)
    for (long k = 0; k < kInner; k++)
#pragma GCC unroll 16
      for (int i = 0; i < kChains; i++)
        acc[i] = _mm256_fmadd_ps(acc[i], a, b);
  __m256 s = acc[0];
  for (int i = 1; i < kChains; i++)
    s = _mm256_add_ps(s, acc[i]);
  alignas(32) float out[8];
  _mm256_store_ps(out, s);
  return out[0];
}

int Lanes() {
  if (__builtin_cpu_supports("avx512f"))
    return 16;
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
    return 8;
  return 0;
}

double Run(long iters) {
  return Lanes() == 16 ? RunAvx512(iters) : RunAvx2(iters);
}

// GFLOP/s of `threads` threads each running `iters` outer iterations.
double Measure(int threads, long iters) {
  std::vector<std::thread> pool;
  std::vector<double> sink(threads);
  auto t0 = std::chrono::steady_clock::now();
  for (int t = 0; t < threads; t++)
    pool.emplace_back([&, t] { sink[t] = Run(iters); });
  for (auto &th : pool)
    th.join();
  double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  double flops = 2.0 * Lanes() * kChains * kInner * double(iters) * threads;
  if (sink[0] == 12345.0)
    std::puts("");  // never true; uses the results
  return flops / s / 1e9;
}

}  // namespace

int main(int argc, char **argv) {
  int max_threads = int(std::thread::hardware_concurrency());
  double seconds = 1.0;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--threads"))
      max_threads = std::atoi(argv[i + 1]);
    if (!std::strcmp(argv[i], "--seconds"))
      seconds = std::atof(argv[i + 1]);
  }
  if (Lanes() == 0) {
    std::printf("peak_flops: this CPU has neither AVX-512 nor AVX2+FMA; not measured\n");
    return 77;
  }
  // Calibrate the iteration count to about `seconds` on one thread.
  long iters = 1;
  volatile double keep = 0;  // the calibration runs must not be optimised away
  for (;;) {
    auto t0 = std::chrono::steady_clock::now();
    keep = keep + Run(iters);
    double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (s > 0.05) {
      iters = std::max(1L, long(iters * seconds / s));
      break;
    }
    iters *= 4;
  }
  std::printf("isa %s, %d accumulators\n", Lanes() == 16 ? "avx512" : "avx2+fma", kChains);
  for (int t = 1; t <= max_threads; t++) {
    double best = 0;
    for (int rep = 0; rep < 3; rep++)
      best = std::max(best, Measure(t, iters));
    std::printf("threads %d: %.1f GFLOP/s\n", t, best);
  }
  return 0;
}
