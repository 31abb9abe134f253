// Frame ids and drops as modeld counts them (gst/drive/frame_track.h), against expectations
// written out here from openpilot's rules: dropped = max(0, id − last − 1) with last = 0 at
// start, a first-order filter x ← x + k·(min(dropped, 10) − x) with k = (dt/tau)/(1 + dt/tau),
// dt = 1/20 s, tau = 10 s, zeroed for the first 10 frames, frameDropPerc = 100·x/(1+x).
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "drive/frame_track.h"

namespace {

using op::drive::ChooseFrameIdSource;
using op::drive::FrameIdSource;
using op::drive::FrameTracker;

// The expectation, in double, one entry per received frame.
struct Expected {
  std::vector<uint32_t> dropped;
  std::vector<double> perc;
  std::vector<bool> evaluated;
};

Expected ModeldByHand(const std::vector<uint32_t> &ids) {
  Expected e;
  const double rc = 10.0, dt = 0.05, k = (dt / rc) / (dt / rc + 1.0);
  double x = 0;
  int64_t last = 0;
  for (size_t i = 0; i < ids.size(); i++) {
    const int64_t d = std::max<int64_t>(0, int64_t(ids[i]) - last - 1);
    x = (1.0 - k) * x + k * double(std::min<int64_t>(d, 10));
    if (i < 10)
      x = 0;
    e.dropped.push_back(uint32_t(d));
    e.perc.push_back(100.0 * x / (1.0 + x));
    e.evaluated.push_back(d == 0);
    last = ids[i];
  }
  return e;
}

TEST(FrameTrack, OffsetsAreFrameIdsOnlyByTheVideoConvention) {
  // v4l2src and videotestsrc: offset n, offset_end n + 1.
  EXPECT_EQ(ChooseFrameIdSource(false, true, 41, true, 42), FrameIdSource::kBufferOffset);
  // filesrc: byte offsets, offset_end = offset + size.
  EXPECT_EQ(ChooseFrameIdSource(false, true, 3492144, true, 3492144 + 3492144),
            FrameIdSource::kCounter);
  // rawvideoparse: byte offsets without an end.
  EXPECT_EQ(ChooseFrameIdSource(false, true, 3492144, false, 0), FrameIdSource::kCounter);
  EXPECT_EQ(ChooseFrameIdSource(false, false, 0, false, 0), FrameIdSource::kCounter);
  // The meta (a camera's own id, or a replay's roadCameraState) wins over everything.
  EXPECT_EQ(ChooseFrameIdSource(true, true, 41, true, 42), FrameIdSource::kMeta);
}

TEST(FrameTrack, ConsecutiveIdsFromZeroEvaluateEveryFrame) {
  FrameTracker t;
  for (uint32_t id = 0; id < 100; id++) {
    auto s = t.Step(id);
    EXPECT_TRUE(s.evaluate) << id;
    EXPECT_EQ(s.dropped, 0u);
    EXPECT_EQ(s.frame_drop_perc, 0.0f);
  }
}

TEST(FrameTrack, FirstIdOfTwoOrMoreIsOnlyWarped) {
  for (uint32_t first : {0u, 1u, 2u, 7u, 500u}) {
    FrameTracker t;
    auto s = t.Step(first);
    EXPECT_EQ(s.evaluate, first < 2) << first;
    EXPECT_EQ(s.dropped, first < 2 ? 0u : first - 1) << first;
    EXPECT_FALSE(s.went_backwards);
    EXPECT_TRUE(t.Step(first + 1).evaluate) << first;
  }
}

TEST(FrameTrack, DriveWithFramesRemovedMatchesTheFilterByHand) {
  // 400 frames at 20 Hz with frames removed: single drops, a burst of 15 (clipped to 10), and
  // one drop inside the first 10 frames (counted, skipped, but the filter is held at 0).
  std::vector<uint32_t> ids;
  for (uint32_t id = 0; id < 400; id++) {
    const bool removed = id == 5 || id == 40 || id == 41 || id == 90 || (id >= 200 && id < 215) ||
                         id == 300 || id == 301 || id == 302;
    if (!removed)
      ids.push_back(id);
  }
  const Expected e = ModeldByHand(ids);
  FrameTracker t;
  int skipped = 0;
  for (size_t i = 0; i < ids.size(); i++) {
    auto s = t.Step(ids[i]);
    EXPECT_EQ(s.dropped, e.dropped[i]) << "frame " << ids[i];
    EXPECT_EQ(s.evaluate, e.evaluated[i]) << "frame " << ids[i];
    EXPECT_NEAR(s.frame_drop_perc, e.perc[i], 1e-4) << "frame " << ids[i];
    skipped += !s.evaluate;
  }
  EXPECT_EQ(skipped, 5);  // frames 6, 42, 91, 215 and 303
  // Known values: the burst leaves a clearly visible percentage that decays afterwards.
  EXPECT_GT(e.perc[ids.size() - 1], 0.5);
  EXPECT_EQ(e.perc[3], 0.0);
}

TEST(FrameTrack, IdsGoingBackwardsAreNotDropsButAreReported) {
  FrameTracker t;
  for (uint32_t id = 0; id < 5; id++)
    t.Step(id);
  auto s = t.Step(2);  // a source restarted
  EXPECT_TRUE(s.went_backwards);
  EXPECT_EQ(s.dropped, 0u);
  EXPECT_TRUE(s.evaluate);
  EXPECT_TRUE(t.Step(3).evaluate);
  auto big = t.Step(3 + 4 * 1000 * 1000);  // byte offsets taken for ids would look like this
  EXPECT_TRUE(big.implausible_gap);
  EXPECT_FALSE(big.evaluate);
}

// openpilot: frame_age = frame_id − vipc_frame_id if frame_id > vipc_frame_id else 0, with
// frame_id the latest roadCameraState's.
TEST(FrameTrack, FrameAgeIsHowFarTheNewestFrameIsAhead) {
  EXPECT_EQ(op::drive::FrameAge(10, 7), 3u);
  EXPECT_EQ(op::drive::FrameAge(7, 7), 0u);
  EXPECT_EQ(op::drive::FrameAge(5, 7), 0u);  // a restarted camera: never a wrapped difference
  EXPECT_EQ(op::drive::FrameAge(4000000000u, 0), 4000000000u);
}

}  // namespace
