// The static memory plan: intermediate tensors' lifetimes → offsets in one arena.
//
// Every intermediate tensor of a compiled model lives in one device buffer. Two tensors may share
// bytes only when their lifetimes (the launch steps between the first write and the last read)
// do not overlap. The planner places the largest tensors first at the lowest offset that clashes
// with no tensor already placed whose lifetime overlaps; offsets are aligned to the device's
// base address alignment so any region can also become a sub-buffer.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/status.h"

namespace op::nn {

struct Lifetime {
  uint64_t bytes = 0;
  int first = 0;  // first launch step that writes the tensor
  int last = 0;   // last launch step that reads it (>= first)
};

struct MemoryPlan {
  std::vector<uint64_t> offsets;  // one per lifetime, aligned
  uint64_t arena_bytes = 0;       // what the arena needs
  uint64_t total_bytes = 0;       // the sum of all tensors (aligned): the cost without reuse
  // "arena 1.2 MiB for 3.4 MiB of intermediate tensors (35%)".
  std::string Report() const;
};

// Plans `tensors` with offsets aligned to `alignment` (a power of two, >= 1). Fails on an
// invalid lifetime or an alignment that is not a power of two.
StatusOr<MemoryPlan> PlanMemory(const std::vector<Lifetime> &tensors, uint64_t alignment);

// Checks a plan: every offset aligned, inside the arena, and no two tensors with overlapping
// lifetimes share a byte. Used by tests and when loading untrusted files.
Status CheckPlan(const std::vector<Lifetime> &tensors, const MemoryPlan &plan, uint64_t alignment);

// "1.5 MiB", "312 KiB", "17 B".
std::string FormatBytes(uint64_t bytes);

}  // namespace op::nn
