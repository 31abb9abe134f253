#include "plan.h"

#include <algorithm>
#include <cstdio>
#include <numeric>

namespace op::nn {
namespace {

uint64_t AlignUp(uint64_t v, uint64_t a) {
  return (v + a - 1) / a * a;
}

bool LivesOverlap(const Lifetime &a, const Lifetime &b) {
  return a.first <= b.last && b.first <= a.last;
}

}  // namespace

std::string FormatBytes(uint64_t bytes) {
  char buf[64];
  if (bytes >= (1ull << 20))
    std::snprintf(buf, sizeof(buf), "%.1f MiB", bytes / 1048576.0);
  else if (bytes >= (1ull << 10))
    std::snprintf(buf, sizeof(buf), "%.1f KiB", bytes / 1024.0);
  else
    std::snprintf(buf, sizeof(buf), "%llu B", static_cast<unsigned long long>(bytes));
  return buf;
}

std::string MemoryPlan::Report() const {
  char pct[32];
  std::snprintf(pct, sizeof(pct), "%.0f%%",
                total_bytes ? 100.0 * static_cast<double>(arena_bytes) / total_bytes : 100.0);
  return "arena " + FormatBytes(arena_bytes) + " for " + FormatBytes(total_bytes) +
         " of intermediate tensors (" + pct + ")";
}

StatusOr<MemoryPlan> PlanMemory(const std::vector<Lifetime> &tensors, uint64_t alignment) {
  if (alignment == 0 || (alignment & (alignment - 1)) != 0)
    return InvalidArgument("memory plan: alignment " + std::to_string(alignment) +
                           " is not a power of two");
  MemoryPlan plan;
  plan.offsets.assign(tensors.size(), 0);
  for (size_t i = 0; i < tensors.size(); i++) {
    if (tensors[i].first > tensors[i].last || tensors[i].first < 0)
      return InvalidArgument("memory plan: tensor " + std::to_string(i) + " has lifetime [" +
                             std::to_string(tensors[i].first) + ", " +
                             std::to_string(tensors[i].last) + "]");
    plan.total_bytes += AlignUp(tensors[i].bytes, alignment);
  }

  // Largest first (ties: earliest first) gives tight packings for the pyramid shapes of
  // convolutional networks; the greedy step is O(n^2), fine for a few thousand tensors.
  std::vector<size_t> order(tensors.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    if (tensors[a].bytes != tensors[b].bytes)
      return tensors[a].bytes > tensors[b].bytes;
    return tensors[a].first < tensors[b].first;
  });

  struct Placed {
    uint64_t begin, end;
  };
  std::vector<size_t> placed;
  std::vector<Placed> clash;
  for (size_t idx : order) {
    const Lifetime &t = tensors[idx];
    uint64_t size = AlignUp(std::max<uint64_t>(t.bytes, 1), alignment);
    clash.clear();
    for (size_t p : placed)
      if (LivesOverlap(t, tensors[p]))
        clash.push_back(
            {plan.offsets[p],
             plan.offsets[p] + AlignUp(std::max<uint64_t>(tensors[p].bytes, 1), alignment)});
    std::sort(clash.begin(), clash.end(),
              [](const Placed &a, const Placed &b) { return a.begin < b.begin; });
    // The lowest gap between clashing regions that fits.
    uint64_t offset = 0;
    for (const Placed &c : clash) {
      if (offset + size <= c.begin)
        break;
      offset = std::max(offset, c.end);
    }
    plan.offsets[idx] = offset;
    plan.arena_bytes = std::max(plan.arena_bytes, offset + size);
    placed.push_back(idx);
  }
  return plan;
}

Status CheckPlan(const std::vector<Lifetime> &tensors, const MemoryPlan &plan, uint64_t alignment) {
  if (plan.offsets.size() != tensors.size())
    return Corrupt("memory plan: " + std::to_string(plan.offsets.size()) + " offsets for " +
                   std::to_string(tensors.size()) + " tensors");
  for (size_t i = 0; i < tensors.size(); i++) {
    uint64_t o = plan.offsets[i];
    if (alignment && o % alignment != 0)
      return Corrupt("memory plan: tensor " + std::to_string(i) + " at offset " +
                     std::to_string(o) + " is not aligned to " + std::to_string(alignment));
    if (o > plan.arena_bytes || tensors[i].bytes > plan.arena_bytes - o)
      return Corrupt("memory plan: tensor " + std::to_string(i) + " (" +
                     std::to_string(tensors[i].bytes) + " bytes at " + std::to_string(o) +
                     ") leaves the arena of " + std::to_string(plan.arena_bytes) + " bytes");
  }
  for (size_t i = 0; i < tensors.size(); i++)
    for (size_t j = i + 1; j < tensors.size(); j++) {
      if (!LivesOverlap(tensors[i], tensors[j]) || !tensors[i].bytes || !tensors[j].bytes)
        continue;
      uint64_t a0 = plan.offsets[i], a1 = a0 + tensors[i].bytes;
      uint64_t b0 = plan.offsets[j], b1 = b0 + tensors[j].bytes;
      if (a0 < b1 && b0 < a1)
        return Corrupt("memory plan: tensors " + std::to_string(i) + " and " + std::to_string(j) +
                       " are alive together and share bytes");
    }
  return Status::Ok();
}

}  // namespace op::nn
