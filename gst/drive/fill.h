// Filling the driving messages from parsed outputs (docs/contract.md,
// "Filling the messages"): modelV2, drivingModelData and
// cameraOdometry Events in the schema of schemas/log.capnp.
//
// What persists from frame to frame (the previous action, the hard-brake history, the confidence
// buffer) lives in MessageFiller; everything else comes in per call. One Step() per published
// frame advances that state; the Fill*() calls then write the messages of that frame.
#pragma once

#include <array>
#include <cstdint>

#include "drive/frame_track.h"
#include "drive/parse.h"
#include "log.capnp.h"

namespace op::drive {

// T_IDXS[i] = 10 (i/32)^2 s, X_IDXS[i] = 192 (i/32)^2 m.
const std::array<float, kIdxN> &TIdxs();
const std::array<float, kIdxN> &XIdxs();
inline constexpr std::array<float, kLeadSteps> kLeadTIdxs = {0, 2, 4, 6, 8, 10};
inline constexpr std::array<float, kLeads> kLeadTOffsets = {0, 2, 4};
inline constexpr std::array<float, kMetaHorizons> kMetaTIdxs = {2, 4, 6, 8, 10};

inline constexpr int kConfidenceEvery = 40;  // frames between confidence buffer updates (2 s)
inline constexpr double kConfidenceGreen = 0.01165;
inline constexpr double kConfidenceYellow = 0.06157;
inline constexpr int kPolyDegree = 4;

// Car state: openpilot takes these from the car; the pipeline takes them as live settings.
struct CarSettings {
  float v_ego = 0.0f;       // m/s
  float lat_delay = 0.0f;   // s, steering actuator delay
  float long_delay = 0.0f;  // s, longitudinal actuator delay
  op::msg::LaneChangeState lane_change_state = op::msg::LaneChangeState::OFF;
  op::msg::LaneChangeDirection lane_change_direction = op::msg::LaneChangeDirection::NONE;
};

// Where one frame came from (the provenance meta) and when its messages are logged.
struct FrameInfo {
  uint32_t frame_id = 0;        // main (road) camera
  uint32_t frame_id_extra = 0;  // wide camera
  uint32_t frame_age = 0;
  uint32_t dropped_frames = 0;  // frames dropped just before this one
  float frame_drop_perc = 0.0f;
  uint64_t timestamp_eof = 0;      // ns, main frame end of frame
  float model_execution_time = 0;  // s, warp + networks + parse
  bool calibration_seen = false;   // modelV2/drivingModelData valid
  uint64_t log_mono_time = 0;      // ns, Event.logMonoTime
};

struct Action {
  float desired_curvature = 0.0f;     // 1/m
  float desired_acceleration = 0.0f;  // m/s^2
  bool should_stop = false;
};

// The action from the plan (docs/contract.md, "Filling the messages"): acceleration toward the
// plan's speed after the longitudinal delay, smoothed with a 0.3 s time constant; curvature from
// the plan's yaw after the lateral delay, held below 0.3 m/s.
Action ComputeAction(const ParsedOutputs &out, const CarSettings &car, const Action &previous);

// Least-squares polynomial of degree 4 through (T_IDXS, values[i * stride]), coefficients in
// increasing power.
std::array<float, kPolyDegree + 1> FitPath(const float *values, int stride);

// What one Step() decided for its frame.
struct FrameDecisions {
  Action action;
  bool hard_brake_predicted = false;
  op::msg::ModelDataV2::ConfidenceClass confidence = op::msg::ModelDataV2::ConfidenceClass::RED;
  std::array<float, kPolyDegree + 1> path_x{}, path_y{}, path_z{};
};

class MessageFiller {
 public:
  // Advances the state by one published frame and returns the frame's decisions.
  FrameDecisions Step(const ParsedOutputs &out, const FrameInfo &frame, const CarSettings &car);
  void Reset() { *this = MessageFiller(); }

  // Each writes one whole Event (logMonoTime, valid and the union member).
  static void FillModelV2(op::msg::Event::Builder event, const ParsedOutputs &out,
                          const FrameInfo &frame, const CarSettings &car,
                          const FrameDecisions &decisions);
  static void FillDrivingModelData(op::msg::Event::Builder event, const ParsedOutputs &out,
                                   const FrameInfo &frame, const CarSettings &car,
                                   const FrameDecisions &decisions);
  static void FillCameraOdometry(op::msg::Event::Builder event, const ParsedOutputs &out,
                                 const FrameInfo &frame);

  const Action &previous_action() const { return previous_action_; }
  const std::array<float, 25> &disengage_buffer() const { return disengage_buffer_; }

 private:
  Action previous_action_;
  std::array<float, 5> brake5_history_{};  // hard brake 5 m/s^2 at 2 s, oldest first
  std::array<float, 2> brake3_history_{};  // hard brake 3 m/s^2 at 2 s
  std::array<float, 25> disengage_buffer_{};
};

}  // namespace op::drive
