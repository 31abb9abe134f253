// Parsing a driving model's raw float output into named, decoded quantities
// (docs/contract.md, "Parsing the outputs").
//
// The raw output is one float array; which floats mean what comes only from the model's slice
// table (name → [start, end)), never from offsets written here, because they change between
// model releases. An OutputParser is built once per caps from that table, checking every slice
// the requested services need, and then parses each frame into a fixed-size ParsedOutputs
// without allocating.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "base/status.h"

namespace op::drive {

// Shapes of the contract.
inline constexpr int kIdxN = 33;       // points of a trajectory (T_IDXS / X_IDXS)
inline constexpr int kPlanWidth = 15;  // position, velocity, acceleration, euler, euler rate
inline constexpr int kLaneLines = 4;
inline constexpr int kRoadEdges = 2;
inline constexpr int kLeads = 3;
inline constexpr int kLeadSteps = 6;  // LEAD_T_IDXS
inline constexpr int kLeadWidth = 4;  // x, y, v, a
inline constexpr int kDesireLen = 8;
inline constexpr int kDesirePredLen = 4;  // horizons of desire_pred
inline constexpr int kMetaSize = 55;
inline constexpr int kMetaHorizons = 5;  // META_T_IDXS
inline constexpr int kPlanHypotheses = 5;
inline constexpr int kLeadHypotheses = 2;

// Columns of one plan row.
inline constexpr int kPlanPosition = 0;
inline constexpr int kPlanVelocity = 3;
inline constexpr int kPlanAcceleration = 6;
inline constexpr int kPlanOrientation = 9;
inline constexpr int kPlanOrientationRate = 12;

// The meta index map (55 sigmoid outputs).
inline constexpr int kMetaEngaged = 0;
// Disengage block k (horizon META_T_IDXS[k]) starts at 1 + 6k.
inline constexpr int MetaDisengage(int k) {
  return 1 + 6 * k;
}
inline constexpr int kMetaGasDisengage = 0, kMetaBrakeDisengage = 1, kMetaSteerOverride = 2,
                     kMetaHardBrake3 = 3, kMetaHardBrake4 = 4, kMetaHardBrake5 = 5;
// Press block k (k = 0..5, 0..10 s) starts at 31 + 4k.
inline constexpr int MetaPress(int k) {
  return 31 + 4 * k;
}
inline constexpr int kMetaGasPress = 0, kMetaBrakePress = 1, kMetaLeftBlinker = 2,
                     kMetaRightBlinker = 3;

float SafeExp(float x);  // exp(min(x, 11)): keeps log-stds from overflowing
float Sigmoid(float x);  // 1 / (1 + SafeExp(-x))
void Softmax(const float *in, float *out, int n);  // subtracts the max first

// One named range of the raw output, in floats.
struct OutputSlice {
  std::string name;
  size_t start = 0;
  size_t end = 0;
};
using SliceTable = std::vector<OutputSlice>;

// "name:start:end,name:start:end" (the `slices` field of tensor caps) → table.
StatusOr<SliceTable> ParseSliceTable(const std::string &text);

// The messages a pipeline produces; they decide which slices are required.
enum Service : unsigned {
  kServiceModelV2 = 1u << 0,
  kServiceDrivingModelData = 1u << 1,
  kServiceCameraOdometry = 1u << 2,
};
inline constexpr unsigned kAllServices =
    kServiceModelV2 | kServiceDrivingModelData | kServiceCameraOdometry;
const char *ServiceName(Service service);
// "modelV2,cameraOdometry" → mask; empty or "all" → every service.
StatusOr<unsigned> ParseServices(const std::string &text);

// The decoded outputs of one frame, all float32, row-major in the shapes noted. Means and
// standard deviations of mixture blocks are separate arrays.
struct ParsedOutputs {
  std::array<float, kIdxN * kPlanWidth> plan{}, plan_std{};                  // (33, 15)
  std::array<float, kLaneLines * kIdxN * 2> lane_lines{}, lane_lines_std{};  // (4, 33, 2) y,z
  std::array<float, 2 * kLaneLines> lane_lines_prob{};                       // sigmoid
  std::array<float, kRoadEdges * kIdxN * 2> road_edges{}, road_edges_std{};  // (2, 33, 2)
  std::array<float, kLeads * kLeadSteps * kLeadWidth> lead{}, lead_std{};    // (3, 6, 4)
  std::array<float, kLeads> lead_prob{};                                     // sigmoid
  std::array<float, kDesirePredLen * kDesireLen> desire_pred{};              // softmax per row
  std::array<float, kDesireLen> desire_state{};                              // softmax
  std::array<float, kMetaSize> meta{};                                       // sigmoid
  std::array<float, 6> pose{}, pose_std{};                                   // trans (3), rot (3)
  std::array<float, 3> wide_from_device_euler{}, wide_from_device_euler_std{};
  std::array<float, 6> road_transform{}, road_transform_std{};

  float Plan(int t, int column) const { return plan[t * kPlanWidth + column]; }
  float PlanStd(int t, int column) const { return plan_std[t * kPlanWidth + column]; }
  // line 0..3, point 0..32, yz 0 (y) or 1 (z)
  float LaneLine(int line, int point, int yz) const {
    return lane_lines[(line * kIdxN + point) * 2 + yz];
  }
  float RoadEdge(int edge, int point, int yz) const {
    return road_edges[(edge * kIdxN + point) * 2 + yz];
  }
  float Lead(int lead_index, int step, int column) const {
    return lead[(lead_index * kLeadSteps + step) * kLeadWidth + column];
  }
  float LeadStd(int lead_index, int step, int column) const {
    return lead_std[(lead_index * kLeadSteps + step) * kLeadWidth + column];
  }
  float MetaDisengageProb(int horizon, int which) const {
    return meta[MetaDisengage(horizon) + which];
  }
  float MetaPressProb(int horizon, int which) const { return meta[MetaPress(horizon) + which]; }
};

class OutputParser {
 public:
  // Checks that every slice the services need is present, has a width the contract knows, and
  // lies inside an output of output_size floats. Errors name the slice and the reason.
  static StatusOr<OutputParser> Create(const SliceTable &slices, size_t output_size,
                                       unsigned services = kAllServices);

  // Decodes one frame. raw must hold output_size floats. Does not allocate.
  Status Parse(const float *raw, size_t size, ParsedOutputs *out) const;

  unsigned services() const { return services_; }
  bool plan_multi_hypothesis() const { return plan_.width == kPlanMhpWidth; }
  bool lead_multi_hypothesis() const { return lead_.width == kLeadMhpWidth; }

  static constexpr size_t kPlanWidthSingle = 2 * kIdxN * kPlanWidth;                 // 990
  static constexpr size_t kPlanMhpWidth = kPlanHypotheses * (kPlanWidthSingle + 1);  // 4955
  static constexpr size_t kLeadWidthSingle = 2 * kLeads * kLeadSteps * kLeadWidth;   // 144
  static constexpr size_t kLeadMhpWidth =
      kLeadHypotheses * (2 * kLeadSteps * kLeadWidth + kLeads);  // 102

 private:
  struct Bound {
    bool present = false;
    size_t start = 0;
    size_t width = 0;
  };
  OutputParser() = default;

  size_t output_size_ = 0;
  unsigned services_ = 0;
  Bound plan_, lane_lines_, lane_lines_prob_, road_edges_, lead_, lead_prob_, desire_pred_,
      desire_state_, meta_, pose_, wide_from_device_euler_, road_transform_;
};

}  // namespace op::drive
