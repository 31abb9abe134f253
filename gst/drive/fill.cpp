#include "drive/fill.h"

#include <algorithm>
#include <cmath>

namespace op::drive {

namespace {

using op::msg::Event;
using op::msg::ModelDataV2;
using op::msg::XYZTData;

// The time grid in double: the action and the path fit interpolate on it like numpy does on
// openpilot's Python-float constants.
double TIdx(int i) {
  double r = i / 32.0;
  return 10.0 * r * r;
}

double Interp(double t, const float *values, int stride) {
  if (t <= TIdx(0))
    return values[0];
  if (t >= TIdx(kIdxN - 1))
    return values[(kIdxN - 1) * stride];
  int i = 1;
  while (TIdx(i) < t)
    i++;
  double t0 = TIdx(i - 1), t1 = TIdx(i);
  double v0 = values[(i - 1) * stride], v1 = values[i * stride];
  return v0 + (t - t0) * (v1 - v0) / (t1 - t0);
}

// A list of n floats read with a stride.
void SetList(capnp::List<float>::Builder list, const float *values, int stride = 1) {
  for (unsigned i = 0; i < list.size(); i++)
    list.set(i, values[i * stride]);
}

template <size_t N>
void SetList(capnp::List<float>::Builder list, const std::array<float, N> &values) {
  SetList(list, values.data());
}

// x, y, z at t (each column of `mean` at `column`, `column + 1`, `column + 2` of rows of
// `stride`), with stds when given.
void FillXyzt(XYZTData::Builder b, const float *mean, const float *std, int column, int stride) {
  SetList(b.initT(kIdxN), TIdxs());
  SetList(b.initX(kIdxN), mean + column, stride);
  SetList(b.initY(kIdxN), mean + column + 1, stride);
  SetList(b.initZ(kIdxN), mean + column + 2, stride);
  if (std) {
    SetList(b.initXStd(kIdxN), std + column, stride);
    SetList(b.initYStd(kIdxN), std + column + 1, stride);
    SetList(b.initZStd(kIdxN), std + column + 2, stride);
  }
}

// A lane line or road edge: no times (openpilot sends an empty list), x = X_IDXS, y and z.
void FillLine(XYZTData::Builder b, const float *yz) {
  b.initT(0);
  SetList(b.initX(kIdxN), XIdxs());
  SetList(b.initY(kIdxN), yz, 2);
  SetList(b.initZ(kIdxN), yz + 1, 2);
}

void SetAction(ModelDataV2::Action::Builder b, const Action &a) {
  b.setDesiredCurvature(a.desired_curvature);
  b.setDesiredAcceleration(a.desired_acceleration);
  b.setShouldStop(a.should_stop);
}

}  // namespace

const std::array<float, kIdxN> &TIdxs() {
  static const std::array<float, kIdxN> t = [] {
    std::array<float, kIdxN> v{};
    for (int i = 0; i < kIdxN; i++)
      v[i] = static_cast<float>(TIdx(i));
    return v;
  }();
  return t;
}

const std::array<float, kIdxN> &XIdxs() {
  static const std::array<float, kIdxN> x = [] {
    std::array<float, kIdxN> v{};
    for (int i = 0; i < kIdxN; i++) {
      double r = i / 32.0;
      v[i] = static_cast<float>(192.0 * r * r);
    }
    return v;
  }();
  return x;
}

Action ComputeAction(const ParsedOutputs &out, const CarSettings &car, const Action &previous) {
  Action action;
  // Longitudinal: the acceleration that reaches the plan's speed at t_long, smoothed.
  const double t_long = car.long_delay + 0.3 + 0.05 + 0.025;
  const float *v = out.plan.data() + kPlanVelocity;      // x velocity column
  const float *a = out.plan.data() + kPlanAcceleration;  // x acceleration column
  const double v0 = v[0];
  const double v_target = Interp(t_long, v, kPlanWidth);
  const double a_target = 2.0 * (v_target - v0) / t_long - a[0];
  const double alpha = 1.0 - std::exp(-0.05 / 0.3);
  action.desired_acceleration =
      static_cast<float>(alpha * a_target + (1.0 - alpha) * previous.desired_acceleration);
  // Stopping is decided on the unsmoothed target, as openpilot does.
  action.should_stop = v0 < 0.3 && a_target < 0.1;

  // Lateral: the curvature that reaches the plan's yaw at t_lat; held when nearly stopped.
  if (car.v_ego > 0.3f) {
    const double t_lat = car.lat_delay + 0.05 + 0.025;
    const double speed = std::max<double>(car.v_ego, 1.0);
    const double psi = Interp(t_lat, out.plan.data() + kPlanOrientation + 2, kPlanWidth);
    const double psi_rate = out.plan[kPlanOrientationRate + 2];
    action.desired_curvature = static_cast<float>(2.0 * psi / (speed * t_lat) - psi_rate / speed);
  } else {
    action.desired_curvature = previous.desired_curvature;
  }
  return action;
}

std::array<float, kPolyDegree + 1> FitPath(const float *values, int stride) {
  // Least squares through a QR factorisation (modified Gram-Schmidt) of the Vandermonde
  // matrix, in double: the normal equations would square its condition number.
  constexpr int m = kIdxN, n = kPolyDegree + 1;
  double q[n][m], r[n][n] = {};
  for (int j = 0; j < n; j++)
    for (int i = 0; i < m; i++)
      q[j][i] = std::pow(TIdx(i), j);
  for (int j = 0; j < n; j++) {
    for (int k = 0; k < j; k++) {
      double dot = 0;
      for (int i = 0; i < m; i++)
        dot += q[k][i] * q[j][i];
      r[k][j] = dot;
      for (int i = 0; i < m; i++)
        q[j][i] -= dot * q[k][i];
    }
    double norm = 0;
    for (int i = 0; i < m; i++)
      norm += q[j][i] * q[j][i];
    norm = std::sqrt(norm);
    r[j][j] = norm;
    for (int i = 0; i < m; i++)
      q[j][i] /= norm;
  }
  double qty[n];
  for (int j = 0; j < n; j++) {
    qty[j] = 0;
    for (int i = 0; i < m; i++)
      qty[j] += q[j][i] * values[i * stride];
  }
  double c[n];
  for (int j = n - 1; j >= 0; j--) {
    double s = qty[j];
    for (int k = j + 1; k < n; k++)
      s -= r[j][k] * c[k];
    c[j] = s / r[j][j];
  }
  std::array<float, n> out{};
  for (int j = 0; j < n; j++)
    out[j] = static_cast<float>(c[j]);
  return out;
}

FrameDecisions MessageFiller::Step(const ParsedOutputs &out, const FrameInfo &frame,
                                   const CarSettings &car) {
  FrameDecisions d;
  d.action = ComputeAction(out, car, previous_action_);
  previous_action_ = d.action;

  // Hard brake: the last 5 (resp. 2) values at the 2 s horizon all above their thresholds.
  static constexpr float kBrake5Thresholds[5] = {0.05f, 0.05f, 0.15f, 0.15f, 0.15f};
  static constexpr float kBrake3Thresholds[2] = {0.7f, 0.7f};
  std::rotate(brake5_history_.begin(), brake5_history_.begin() + 1, brake5_history_.end());
  brake5_history_.back() = out.MetaDisengageProb(0, kMetaHardBrake5);
  std::rotate(brake3_history_.begin(), brake3_history_.begin() + 1, brake3_history_.end());
  brake3_history_.back() = out.MetaDisengageProb(0, kMetaHardBrake3);
  bool hard = true;
  for (int i = 0; i < 5; i++)
    hard = hard && brake5_history_[i] > kBrake5Thresholds[i];
  for (int i = 0; i < 2; i++)
    hard = hard && brake3_history_[i] > kBrake3Thresholds[i];
  d.hard_brake_predicted = hard;

  // Confidence: every 2 s, the independent disengage probability of each 2 s slice enters a
  // buffer of the last 5 updates; the score reads the diagonal that refers to the same time.
  if (frame.frame_id % kConfidenceEvery == 0) {
    float any[kMetaHorizons];
    for (int k = 0; k < kMetaHorizons; k++) {
      float brake = out.MetaDisengageProb(k, kMetaBrakeDisengage);
      float gas = out.MetaDisengageProb(k, kMetaGasDisengage);
      float steer = out.MetaDisengageProb(k, kMetaSteerOverride);
      any[k] = 1.0f - (1.0f - brake) * (1.0f - gas) * (1.0f - steer);
    }
    std::rotate(disengage_buffer_.begin(), disengage_buffer_.begin() + kMetaHorizons,
                disengage_buffer_.end());
    float *tail = disengage_buffer_.data() + disengage_buffer_.size() - kMetaHorizons;
    tail[0] = any[0];
    for (int k = 1; k < kMetaHorizons; k++)
      tail[k] = (any[k] - any[k - 1]) / (1.0f - any[k - 1]);
  }
  double score = 0.0;  // openpilot sums in Python floats
  for (int i = 0; i < kMetaHorizons; i++)
    score += static_cast<double>(disengage_buffer_[i * kMetaHorizons + kMetaHorizons - 1 - i]) /
             kMetaHorizons;
  using Confidence = op::msg::ModelDataV2::ConfidenceClass;
  d.confidence = score < kConfidenceGreen    ? Confidence::GREEN
                 : score < kConfidenceYellow ? Confidence::YELLOW
                                             : Confidence::RED;

  d.path_x = FitPath(out.plan.data() + kPlanPosition + 0, kPlanWidth);
  d.path_y = FitPath(out.plan.data() + kPlanPosition + 1, kPlanWidth);
  d.path_z = FitPath(out.plan.data() + kPlanPosition + 2, kPlanWidth);
  return d;
}

void MessageFiller::FillModelV2(Event::Builder event, const ParsedOutputs &out,
                                const FrameInfo &frame, const CarSettings &car,
                                const FrameDecisions &decisions) {
  event.setLogMonoTime(frame.log_mono_time);
  event.setValid(frame.calibration_seen);
  ModelDataV2::Builder m = event.initModelV2();
  m.setFrameId(frame.frame_id);
  m.setFrameIdExtra(frame.frame_id_extra);
  m.setFrameAge(frame.frame_age);
  m.setFrameDropPerc(frame.frame_drop_perc);
  m.setTimestampEof(frame.timestamp_eof);
  m.setModelExecutionTime(frame.model_execution_time);

  const float *plan = out.plan.data();
  FillXyzt(m.initPosition(), plan, out.plan_std.data(), kPlanPosition, kPlanWidth);
  FillXyzt(m.initVelocity(), plan, nullptr, kPlanVelocity, kPlanWidth);
  FillXyzt(m.initAcceleration(), plan, nullptr, kPlanAcceleration, kPlanWidth);
  FillXyzt(m.initOrientation(), plan, nullptr, kPlanOrientation, kPlanWidth);
  FillXyzt(m.initOrientationRate(), plan, nullptr, kPlanOrientationRate, kPlanWidth);

  auto lines = m.initLaneLines(kLaneLines);
  auto line_stds = m.initLaneLineStds(kLaneLines);
  for (int i = 0; i < kLaneLines; i++) {
    FillLine(lines[i], out.lane_lines.data() + i * kIdxN * 2);
    line_stds.set(i, out.lane_lines_std[i * kIdxN * 2]);  // y at the first point
  }
  auto line_probs = m.initLaneLineProbs(kLaneLines);
  for (int i = 0; i < kLaneLines; i++)
    line_probs.set(i, out.lane_lines_prob[2 * i + 1]);

  auto edges = m.initRoadEdges(kRoadEdges);
  auto edge_stds = m.initRoadEdgeStds(kRoadEdges);
  for (int i = 0; i < kRoadEdges; i++) {
    FillLine(edges[i], out.road_edges.data() + i * kIdxN * 2);
    edge_stds.set(i, out.road_edges_std[i * kIdxN * 2]);
  }

  auto leads = m.initLeadsV3(kLeads);
  for (int i = 0; i < kLeads; i++) {
    auto lead = leads[i];
    lead.setProb(out.lead_prob[i]);
    lead.setProbTime(kLeadTOffsets[i]);
    SetList(lead.initT(kLeadSteps), kLeadTIdxs);
    const float *mean = out.lead.data() + i * kLeadSteps * kLeadWidth;
    const float *std = out.lead_std.data() + i * kLeadSteps * kLeadWidth;
    SetList(lead.initX(kLeadSteps), mean + 0, kLeadWidth);
    SetList(lead.initXStd(kLeadSteps), std + 0, kLeadWidth);
    SetList(lead.initY(kLeadSteps), mean + 1, kLeadWidth);
    SetList(lead.initYStd(kLeadSteps), std + 1, kLeadWidth);
    SetList(lead.initV(kLeadSteps), mean + 2, kLeadWidth);
    SetList(lead.initVStd(kLeadSteps), std + 2, kLeadWidth);
    SetList(lead.initA(kLeadSteps), mean + 3, kLeadWidth);
    SetList(lead.initAStd(kLeadSteps), std + 3, kLeadWidth);
  }

  auto meta = m.initMeta();
  meta.setEngagedProb(out.meta[kMetaEngaged]);
  SetList(meta.initDesireState(kDesireLen), out.desire_state);
  SetList(meta.initDesirePrediction(kDesirePredLen * kDesireLen), out.desire_pred);
  auto dp = meta.initDisengagePredictions();
  SetList(dp.initT(kMetaHorizons), kMetaTIdxs);
  const float *disengage = out.meta.data() + MetaDisengage(0);
  SetList(dp.initBrakeDisengageProbs(kMetaHorizons), disengage + kMetaBrakeDisengage, 6);
  SetList(dp.initGasDisengageProbs(kMetaHorizons), disengage + kMetaGasDisengage, 6);
  SetList(dp.initSteerOverrideProbs(kMetaHorizons), disengage + kMetaSteerOverride, 6);
  SetList(dp.initBrake3MetersPerSecondSquaredProbs(kMetaHorizons), disengage + kMetaHardBrake3, 6);
  SetList(dp.initBrake4MetersPerSecondSquaredProbs(kMetaHorizons), disengage + kMetaHardBrake4, 6);
  SetList(dp.initBrake5MetersPerSecondSquaredProbs(kMetaHorizons), disengage + kMetaHardBrake5, 6);
  const float *press = out.meta.data() + MetaPress(0);
  SetList(dp.initGasPressProbs(kMetaHorizons + 1), press + kMetaGasPress, 4);
  SetList(dp.initBrakePressProbs(kMetaHorizons + 1), press + kMetaBrakePress, 4);
  meta.setHardBrakePredicted(decisions.hard_brake_predicted);
  meta.setLaneChangeState(car.lane_change_state);
  meta.setLaneChangeDirection(car.lane_change_direction);

  m.setConfidence(decisions.confidence);
  SetAction(m.initAction(), decisions.action);
}

void MessageFiller::FillDrivingModelData(Event::Builder event, const ParsedOutputs &out,
                                         const FrameInfo &frame, const CarSettings &car,
                                         const FrameDecisions &decisions) {
  event.setLogMonoTime(frame.log_mono_time);
  event.setValid(frame.calibration_seen);
  auto d = event.initDrivingModelData();
  d.setFrameId(frame.frame_id);
  d.setFrameIdExtra(frame.frame_id_extra);
  d.setFrameDropPerc(frame.frame_drop_perc);
  d.setModelExecutionTime(frame.model_execution_time);
  SetAction(d.initAction(), decisions.action);

  auto path = d.initPath();
  SetList(path.initXCoefficients(kPolyDegree + 1), decisions.path_x);
  SetList(path.initYCoefficients(kPolyDegree + 1), decisions.path_y);
  SetList(path.initZCoefficients(kPolyDegree + 1), decisions.path_z);

  // Lines 1 and 2 are the ego lane's left and right; their probabilities are lane_lines_prob
  // entries 3 and 5 (modelV2's laneLineProbs[1] and [2]).
  auto lane = d.initLaneLineMeta();
  lane.setLeftY(out.LaneLine(1, 0, 0));
  lane.setRightY(out.LaneLine(2, 0, 0));
  lane.setLeftProb(out.lane_lines_prob[3]);
  lane.setRightProb(out.lane_lines_prob[5]);

  auto meta = d.initMeta();
  meta.setLaneChangeState(car.lane_change_state);
  meta.setLaneChangeDirection(car.lane_change_direction);
}

void MessageFiller::FillCameraOdometry(Event::Builder event, const ParsedOutputs &out,
                                       const FrameInfo &frame) {
  event.setLogMonoTime(frame.log_mono_time);
  event.setValid(frame.calibration_seen && frame.dropped_frames < 1);
  auto c = event.initCameraOdometry();
  c.setFrameId(frame.frame_id);
  c.setTimestampEof(frame.timestamp_eof);
  SetList(c.initTrans(3), out.pose.data());
  SetList(c.initRot(3), out.pose.data() + 3);
  SetList(c.initTransStd(3), out.pose_std.data());
  SetList(c.initRotStd(3), out.pose_std.data() + 3);
  SetList(c.initWideFromDeviceEuler(3), out.wide_from_device_euler);
  SetList(c.initWideFromDeviceEulerStd(3), out.wide_from_device_euler_std);
  SetList(c.initRoadTransformTrans(3), out.road_transform.data());
  SetList(c.initRoadTransformTransStd(3), out.road_transform_std.data());
}

}  // namespace op::drive
