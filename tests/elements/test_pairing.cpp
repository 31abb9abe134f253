// The pairing decision (plugins/opvision/pairing.h) against openpilot's receive loop written out
// here as modeld runs it: for each iteration, receive main frames while main < wide + 25 ms
// (wide: the previous pair's), then wide frames until main < wide + 25 ms, and run that pair.
// Both are driven over the same two streams; the pairs must be the same.
#include <gtest/gtest.h>

#include <cstdint>
#include <utility>
#include <vector>

#include "opvision/pairing.h"

namespace {

using op::vision::DecidePair;
using op::vision::PairAction;
using Pairs = std::vector<std::pair<int, int>>;  // (main index, wide index)

constexpr int64_t kMs = 1'000'000;

// modeld's loop. Frame times start at 0 in its FrameMeta defaults; the streams start later.
Pairs Modeld(const std::vector<int64_t> &mains, const std::vector<int64_t> &wides) {
  Pairs out;
  int i = -1, j = -1;
  int64_t main_sof = 0, wide_sof = 0;
  for (;;) {
    while (main_sof < wide_sof + 25 * kMs) {
      if (++i >= int(mains.size()))
        return out;
      main_sof = mains[size_t(i)];
    }
    for (;;) {
      if (++j >= int(wides.size()))
        return out;  // modeld would wait for the wide camera
      wide_sof = wides[size_t(j)];
      if (main_sof < wide_sof + 25 * kMs)
        break;
    }
    out.push_back({i, j});
  }
}

// The element's loop over DecidePair, with both streams queued.
Pairs Element(const std::vector<int64_t> &mains, const std::vector<int64_t> &wides) {
  Pairs out;
  size_t i = 0, j = 0;
  bool have_previous = false;
  int64_t previous = 0;
  while (i < mains.size()) {
    op::vision::PairInput in;
    in.main_ns = mains[i];
    in.wide_present = j < wides.size();
    in.wide_ns = in.wide_present ? wides[j] : 0;
    in.wide_ended = !in.wide_present;
    in.have_previous_wide = have_previous;
    in.previous_wide_ns = previous;
    const PairAction a = DecidePair(in).action;
    if (a == PairAction::kDropWide) {
      j++;
    } else if (a == PairAction::kDropMain) {
      i++;
    } else if (a == PairAction::kPair) {
      out.push_back({int(i), int(j)});
      have_previous = true;
      previous = wides[j];
      i++, j++;
    } else {
      break;  // the wide stream ended: modeld would wait, the element runs the road alone
    }
  }
  return out;
}

std::vector<int64_t> Stream(int n, int64_t start_ms, int64_t period_ms,
                            const std::vector<int> &missing = {}) {
  std::vector<int64_t> t;
  for (int k = 0; k < n; k++) {
    bool gone = false;
    for (int m : missing)
      gone |= m == k;
    if (!gone)
      t.push_back((1000 + start_ms + k * period_ms) * kMs);
  }
  return t;
}

void ExpectSame(const std::vector<int64_t> &mains, const std::vector<int64_t> &wides) {
  const Pairs want = Modeld(mains, wides);
  EXPECT_FALSE(want.empty());
  EXPECT_EQ(Element(mains, wides), want);
}

TEST(Pairing, InSync) {
  ExpectSame(Stream(20, 0, 50), Stream(20, 1, 50));
}

TEST(Pairing, JitteredWide) {
  std::vector<int64_t> wides = Stream(10, 0, 50);
  const int64_t jitter_ms[] = {0, 6, -8, 12, -15, 3, 10, -11, 24, -24};
  for (size_t k = 0; k < wides.size(); k++)
    wides[k] += jitter_ms[k] * kMs;
  ExpectSame(Stream(10, 0, 50), wides);
}

TEST(Pairing, WideLagsThirtyMilliseconds) {
  const std::vector<int64_t> mains = Stream(8, 0, 50), wides = Stream(8, 30, 50);
  ExpectSame(mains, wides);
  // As modeld: road 0 pairs (30 ms apart), road 1 is passed over, then road k with wide k − 1.
  EXPECT_EQ(Element(mains, wides), (Pairs{{0, 0}, {2, 1}, {3, 2}, {4, 3}, {5, 4}, {6, 5}, {7, 6}}));
}

TEST(Pairing, WideLeadsThirtyMilliseconds) {
  ExpectSame(Stream(8, 0, 50), Stream(8, -30, 50));
}

TEST(Pairing, WideAtTwiceTheRate) {
  ExpectSame(Stream(5, 0, 50), Stream(10, -26, 25));
}

TEST(Pairing, WideStartsLate) {
  ExpectSame(Stream(10, 0, 50), Stream(8, 100, 50));
}

TEST(Pairing, FramesMissingOnEitherSide) {
  ExpectSame(Stream(20, 0, 50, {3, 9, 10}), Stream(20, 2, 50, {5, 6, 14}));
}

TEST(Pairing, ExactlyTwentyFiveMillisecondsOlderWideIsDropped) {
  op::vision::PairInput in;
  in.main_ns = 1000 * kMs;
  in.wide_present = true;
  in.wide_ns = 975 * kMs;
  EXPECT_EQ(DecidePair(in).action, PairAction::kDropWide);
  in.wide_ns = 976 * kMs;
  EXPECT_EQ(DecidePair(in).action, PairAction::kPair);
  EXPECT_TRUE(DecidePair(in).out_of_sync);  // 24 ms > 10 ms: run, but logged
}

}  // namespace
