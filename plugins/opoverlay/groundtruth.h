// The synthetic drive's ground truth (samples/drive/README.md, written by tools/synthdrive),
// read for drawing beside the model's predictions. Without GStreamer.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "base/status.h"
#include "drive/parse.h"

namespace op::overlay {

// One frame's truth in the calibrated car frame (x forward, y right, z down, origin at the
// camera). Unknown values (null in the file: beyond the rendered road) are NaN.
struct TruthFrame {
  int64_t frame_id = 0;
  int64_t sof_ns = 0;  // start-of-frame capture time, the frame's PTS in the sample's streams
  std::array<std::array<float, drive::kIdxN>, drive::kLaneLines> lane_lines_y{};
  std::array<std::array<float, drive::kIdxN>, drive::kRoadEdges> road_edges_y{};
  float lead_x = 0, lead_y = 0;  // rear bumper of the lead car (NaN when there is none)
};

struct GroundTruth {
  double camera_height = 0;                  // metres above the (flat) road
  std::array<float, drive::kIdxN> x_idxs{};  // where the lines are sampled (X_IDXS)
  std::vector<TruthFrame> frames;            // in capture order

  // The frame whose capture time is nearest `sof_ns`, if it is within `tolerance_ns`.
  const TruthFrame *Find(int64_t sof_ns, int64_t tolerance_ns) const;
};

// Reads the JSON file; errors name the file and the field that is missing or malformed.
StatusOr<GroundTruth> LoadGroundTruth(const std::string &path);

}  // namespace op::overlay
