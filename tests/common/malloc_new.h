// Every form of the global operator new and delete, on malloc / aligned_alloc and free, for the
// tests that count allocations (include it in one file of the test executable). Before the
// include, the test defines `void CountAllocation()`, called for each allocation.
//
// All forms are replaced, not only `operator new(size_t)`: a replaced new must be paired with a
// replaced delete, and the forms left to the runtime must not mix with ours. Under
// AddressSanitizer the runtime's new and delete are the sanitizer's own; malloc'd memory freed by
// its delete, or its nothrow new (std::stable_sort's buffer) freed by ours, is reported as an
// alloc-dealloc mismatch.
#pragma once

#include <cstddef>
#include <cstdlib>
#include <new>

void CountAllocation();

namespace op_test_new {

inline void *Allocate(std::size_t n, std::size_t align) {
  CountAllocation();
  if (n == 0)
    n = 1;
  void *p = align <= alignof(std::max_align_t)
                ? std::malloc(n)
                : std::aligned_alloc(align, (n + align - 1) / align * align);
  if (!p)
    throw std::bad_alloc();
  return p;
}

inline void *AllocateNoThrow(std::size_t n, std::size_t align) noexcept {
  try {
    return Allocate(n, align);
  } catch (...) {
    return nullptr;
  }
}

}  // namespace op_test_new

// These pair malloc with free; GCC, seeing malloc through an inlined operator new, cannot see
// that in the including file either.
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"

void *operator new(std::size_t n) {
  return op_test_new::Allocate(n, 0);
}
void *operator new[](std::size_t n) {
  return op_test_new::Allocate(n, 0);
}
void *operator new(std::size_t n, const std::nothrow_t &) noexcept {
  return op_test_new::AllocateNoThrow(n, 0);
}
void *operator new[](std::size_t n, const std::nothrow_t &) noexcept {
  return op_test_new::AllocateNoThrow(n, 0);
}
void *operator new(std::size_t n, std::align_val_t a) {
  return op_test_new::Allocate(n, static_cast<std::size_t>(a));
}
void *operator new[](std::size_t n, std::align_val_t a) {
  return op_test_new::Allocate(n, static_cast<std::size_t>(a));
}
void *operator new(std::size_t n, std::align_val_t a, const std::nothrow_t &) noexcept {
  return op_test_new::AllocateNoThrow(n, static_cast<std::size_t>(a));
}
void *operator new[](std::size_t n, std::align_val_t a, const std::nothrow_t &) noexcept {
  return op_test_new::AllocateNoThrow(n, static_cast<std::size_t>(a));
}

void operator delete(void *p) noexcept {
  std::free(p);
}
void operator delete[](void *p) noexcept {
  std::free(p);
}
void operator delete(void *p, std::size_t) noexcept {
  std::free(p);
}
void operator delete[](void *p, std::size_t) noexcept {
  std::free(p);
}
void operator delete(void *p, const std::nothrow_t &) noexcept {
  std::free(p);
}
void operator delete[](void *p, const std::nothrow_t &) noexcept {
  std::free(p);
}
void operator delete(void *p, std::align_val_t) noexcept {
  std::free(p);
}
void operator delete[](void *p, std::align_val_t) noexcept {
  std::free(p);
}
void operator delete(void *p, std::size_t, std::align_val_t) noexcept {
  std::free(p);
}
void operator delete[](void *p, std::size_t, std::align_val_t) noexcept {
  std::free(p);
}
void operator delete(void *p, std::align_val_t, const std::nothrow_t &) noexcept {
  std::free(p);
}
void operator delete[](void *p, std::align_val_t, const std::nothrow_t &) noexcept {
  std::free(p);
}
