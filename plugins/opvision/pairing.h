// Pairing the road (`img`) and wide (`big_img`) tensors by capture time
// (docs/contract.md, cameras and frames).
//
// openpilot's modeld receive loop, for each new main frame: a main frame less than 25 ms after
// the wide frame of the previous pair is passed over (received, not used: the next main frame
// then counts it as dropped); then wide frames are taken until one is less than 25 ms older than
// the main frame (older ones are dropped), and the pair is run however far apart it is; a pair
// more than 10 ms apart is run all the same, only logged.
// This is that rule as a pure decision over two times, so the element stays a thin loop over
// its pads and the rule is tested without GStreamer.
#pragma once

#include <cstdint>

namespace op::vision {

// Both windows of the contract, in nanoseconds.
constexpr int64_t kPairWindowNs = 25'000'000;
constexpr int64_t kDefaultMaxSkewNs = 10'000'000;

enum class PairAction {
  kPair,       // run on this main and this wide buffer (both consumed)
  kMainAlone,  // run with the main buffer as both inputs (single camera, or the wide one ended)
  kDropWide,   // the wide buffer is too old for this and every later main frame: drop it, retry
  kDropMain,   // the main buffer is not 25 ms past the previous pair's wide one: pass it over
  kWait,       // no wide buffer yet: wait for one (or for the wide stream to end)
};
const char *PairActionName(PairAction a);

struct PairInput {
  int64_t main_ns = 0;              // capture time of the main buffer (one is always present)
  bool wide_linked = true;          // big_img has a peer; unlinked means single-camera mode
  bool wide_present = false;        // a wide buffer is queued
  int64_t wide_ns = 0;              // its capture time when present
  bool wide_ended = false;          // big_img got EOS and its queue is empty
  bool timed_out = false;           // a live aggregator's deadline passed without a wide buffer
  bool have_previous_wide = false;  // a pair was run since the start (or the last flush)
  int64_t previous_wide_ns = 0;     // capture time of the wide buffer of the previous pair
};

struct PairDecision {
  PairAction action = PairAction::kWait;
  int64_t skew_ns = 0;       // |main − wide| for kPair
  bool out_of_sync = false;  // kPair with skew above max_skew
};

PairDecision DecidePair(const PairInput &in, int64_t max_skew_ns = kDefaultMaxSkewNs);

}  // namespace op::vision
