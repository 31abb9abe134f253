// Frame ids and frame drops as openpilot's modeld sees them, without GStreamer.
//
// A frame's id comes from the camera (or, in a replay, from the route's camera-state messages).
// modeld counts the frames missing before each main frame it receives,
//   dropped = max(0, frame_id − last_frame_id − 1), with last_frame_id = 0 at start,
// smooths min(dropped, 10) with a first-order filter (time constant 10 s at 20 Hz, held at 0 for
// the first 10 frames) into frameDropPerc = 100·f/(1+f), and warps but does not evaluate a frame
// with dropped > 0. So a stream whose first id is 2 or more (a live camera) starts with a frame
// that is only warped. These are those rules as pure decisions the elements call per frame.
#pragma once

#include <algorithm>
#include <cstdint>

namespace op::drive {

// Where a frame's id comes from.
enum class FrameIdSource {
  kMeta,          // the provenance meta (a camera source or a replay put it there)
  kBufferOffset,  // the buffer offset is a frame number (GStreamer's video convention)
  kCounter,       // nothing usable: frames are counted from 0
};

// Whether a buffer's offset fields number frames: GStreamer's video convention, as cameras
// (v4l2src) and test sources fill them, is offset = frame number and offset_end = offset + 1.
// Byte offsets (filesrc: offset_end = offset + size; rawvideoparse and other parsers: no
// offset_end) are not frame ids.
inline bool OffsetIsFrameNumber(bool offset_valid, uint64_t offset, bool offset_end_valid,
                                uint64_t offset_end) {
  return offset_valid && offset_end_valid && offset_end == offset + 1;
}

inline FrameIdSource ChooseFrameIdSource(bool has_meta, bool offset_valid, uint64_t offset,
                                         bool offset_end_valid, uint64_t offset_end) {
  if (has_meta)
    return FrameIdSource::kMeta;
  if (OffsetIsFrameNumber(offset_valid, offset, offset_end_valid, offset_end))
    return FrameIdSource::kBufferOffset;
  return FrameIdSource::kCounter;
}

inline const char *FrameIdSourceName(FrameIdSource s) {
  switch (s) {
    case FrameIdSource::kMeta:
      return "frame meta";
    case FrameIdSource::kBufferOffset:
      return "buffer offset";
    case FrameIdSource::kCounter:
      return "frame counter";
  }
  return "unknown";
}

// openpilot's dropped-frame filter: min(dropped, 10) through a first-order filter
// (k = dt/(tau+dt), dt 0.05 s, tau 10 s), forced to 0 for the first 10 frames;
// Percent() = 100 f / (1 + f).
class FrameDropFilter {
 public:
  void Update(uint32_t dropped) {
    constexpr float dt = 0.05f, tau = 10.0f;
    constexpr float k = dt / (tau + dt);
    const float input = static_cast<float>(std::min<uint32_t>(dropped, 10));
    value_ = (1.0f - k) * value_ + k * input;
    // The filter starts settled: the first frames of a stream always look like drops.
    if (frames_ < 10)
      value_ = 0.0f;
    frames_++;
  }
  float Percent() const { return 100.0f * value_ / (1.0f + value_); }
  void Reset() { *this = FrameDropFilter(); }

 private:
  float value_ = 0.0f;
  uint32_t frames_ = 0;
};

// modelV2.frameAge as openpilot's modeld fills it: how far the newest camera frame id seen when
// the messages are filled (its latest roadCameraState) is ahead of the evaluated frame's id; 0
// when it is not ahead.
inline uint32_t FrameAge(uint32_t newest_id, uint32_t frame_id) {
  return newest_id > frame_id ? newest_id - frame_id : 0;
}

// A gap this large is not a drop a camera makes (20 Hz: more than 50 s missing): the ids are
// probably not frame numbers, and the element says so.
inline constexpr uint32_t kImplausibleGap = 1000;

// What modeld does with one received main frame.
struct FrameStep {
  uint32_t dropped = 0;          // frames missing just before this one
  bool evaluate = true;          // false: warp only (dropped > 0)
  float frame_drop_perc = 0;     // the filter after this frame (modelV2.frameDropPerc)
  bool went_backwards = false;   // the id is not above the previous one (a restarted source)
  bool implausible_gap = false;  // dropped >= kImplausibleGap
};

// One camera stream's drop accounting, fed with every main frame that modeld would receive.
// A frame the pipeline discards before evaluation (QoS, no wide partner) is not received: it is
// not stepped, so the next frame counts it as dropped, as modeld counts a frame it never got.
class FrameTracker {
 public:
  FrameStep Step(uint32_t frame_id) {
    FrameStep s;
    const int64_t gap = int64_t(frame_id) - int64_t(last_id_) - 1;
    s.dropped = gap > 0 ? uint32_t(gap) : 0;
    s.went_backwards = received_ && frame_id <= last_id_;
    s.implausible_gap = s.dropped >= kImplausibleGap;
    filter_.Update(s.dropped);
    s.frame_drop_perc = filter_.Percent();
    s.evaluate = s.dropped == 0;
    last_id_ = frame_id;
    received_ = true;
    return s;
  }
  void Reset() { *this = FrameTracker(); }
  // After a flush: `next_id` is taken as following the last frame (no drop); the filter stays.
  void ContinueAt(uint32_t next_id) {
    last_id_ = next_id > 0 ? next_id - 1 : 0;
    received_ = false;
  }
  uint32_t last_id() const { return last_id_; }

 private:
  uint32_t last_id_ = 0;  // modeld starts with 0, so a first id of 2 or more is a drop
  bool received_ = false;
  FrameDropFilter filter_;
};

}  // namespace op::drive
