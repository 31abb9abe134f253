#include "pairing.h"

namespace op::vision {

const char *PairActionName(PairAction a) {
  switch (a) {
    case PairAction::kPair:
      return "pair";
    case PairAction::kMainAlone:
      return "main-alone";
    case PairAction::kDropWide:
      return "drop-wide";
    case PairAction::kDropMain:
      return "drop-main";
    case PairAction::kWait:
      return "wait";
  }
  return "unknown";
}

PairDecision DecidePair(const PairInput &in, int64_t max_skew_ns) {
  PairDecision d;
  if (!in.wide_linked) {
    d.action = PairAction::kMainAlone;
    return d;
  }
  // modeld's main loop: receive main frames while main < previous wide + 25 ms.
  if (in.have_previous_wide && in.main_ns < in.previous_wide_ns + kPairWindowNs) {
    d.action = PairAction::kDropMain;
    return d;
  }
  if (!in.wide_present) {
    // A stopped wide camera must not stall the road camera: once its stream has ended, or a
    // live deadline passed, the road frame runs alone as in single-camera mode.
    d.action = (in.wide_ended || in.timed_out) ? PairAction::kMainAlone : PairAction::kWait;
    return d;
  }
  // modeld's wide loop: receive wide frames until main < wide + 25 ms (a wide frame exactly
  // 25 ms older is dropped); the first such wide frame pairs, however much newer it is.
  if (!(in.main_ns < in.wide_ns + kPairWindowNs)) {
    d.action = PairAction::kDropWide;
    return d;
  }
  d.action = PairAction::kPair;
  d.skew_ns = in.main_ns > in.wide_ns ? in.main_ns - in.wide_ns : in.wide_ns - in.main_ns;
  d.out_of_sync = d.skew_ns > max_skew_ns;
  return d;
}

}  // namespace op::vision
