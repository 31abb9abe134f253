#include "drive/parse.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>

namespace op::drive {

float SafeExp(float x) {
  return std::exp(std::min(x, 11.0f));
}

float Sigmoid(float x) {
  return 1.0f / (1.0f + SafeExp(-x));
}

void Softmax(const float *in, float *out, int n) {
  float max = in[0];
  for (int i = 1; i < n; i++)
    max = std::max(max, in[i]);
  float sum = 0.0f;
  for (int i = 0; i < n; i++) {
    out[i] = std::exp(in[i] - max);
    sum += out[i];
  }
  for (int i = 0; i < n; i++)
    out[i] /= sum;
}

namespace {

std::string Trim(const std::string &s) {
  size_t b = s.find_first_not_of(" \t\n");
  if (b == std::string::npos)
    return "";
  size_t e = s.find_last_not_of(" \t\n");
  return s.substr(b, e - b + 1);
}

std::vector<std::string> Split(const std::string &s, char sep) {
  std::vector<std::string> parts;
  size_t begin = 0;
  while (true) {
    size_t end = s.find(sep, begin);
    parts.push_back(s.substr(begin, end == std::string::npos ? std::string::npos : end - begin));
    if (end == std::string::npos)
      break;
    begin = end + 1;
  }
  return parts;
}

bool ParseSize(const std::string &text, size_t *out) {
  if (text.empty() || text.find_first_not_of("0123456789") != std::string::npos)
    return false;
  errno = 0;
  unsigned long long v = std::strtoull(text.c_str(), nullptr, 10);
  if (errno != 0)
    return false;
  *out = static_cast<size_t>(v);
  return true;
}

// A single Gaussian block: [means (n), log-stds (n)].
void ParseGaussian(const float *raw, int n, float *mean, float *std) {
  for (int i = 0; i < n; i++) {
    mean[i] = raw[i];
    std[i] = SafeExp(raw[n + i]);
  }
}

// A multi-hypothesis block: `hypotheses` rows of [means (n), log-stds (n), selection logits (k)].
// For each selection column c, softmax over the hypotheses and take the most probable one whole
// (no mixing) into row c of mean/std (k rows of n). Ties go to the later hypothesis, as a
// descending sort of the weights with a stable ascending sort underneath does.
void ParseMultiHypothesis(const float *raw, int hypotheses, int n, int k, float *mean, float *std) {
  const int row = 2 * n + k;
  float logits[kPlanHypotheses > kLeadHypotheses ? kPlanHypotheses : kLeadHypotheses];
  float weights[sizeof(logits) / sizeof(logits[0])];
  for (int c = 0; c < k; c++) {
    for (int h = 0; h < hypotheses; h++)
      logits[h] = raw[h * row + 2 * n + c];
    Softmax(logits, weights, hypotheses);
    int best = 0;
    for (int h = 1; h < hypotheses; h++)
      if (weights[h] >= weights[best])
        best = h;
    ParseGaussian(raw + best * row, n, mean + c * n, std + c * n);
  }
}

struct Known {
  const char *name;
  size_t widths[2];   // accepted widths (the second 0 when only one)
  unsigned services;  // services that need it
};

constexpr unsigned kMv2 = kServiceModelV2;
constexpr unsigned kDmd = kServiceDrivingModelData;
constexpr unsigned kOdo = kServiceCameraOdometry;

}  // namespace

StatusOr<SliceTable> ParseSliceTable(const std::string &text) {
  SliceTable table;
  if (Trim(text).empty())
    return table;
  for (const std::string &item : Split(text, ',')) {
    std::vector<std::string> f = Split(Trim(item), ':');
    OutputSlice s;
    if (f.size() != 3 || Trim(f[0]).empty() || !ParseSize(Trim(f[1]), &s.start) ||
        !ParseSize(Trim(f[2]), &s.end) || s.end < s.start)
      return InvalidArgument("slice '" + Trim(item) + "' is not name:start:end with start <= end");
    s.name = Trim(f[0]);
    for (const OutputSlice &other : table)
      if (other.name == s.name)
        return InvalidArgument("slice '" + s.name + "' appears twice");
    table.push_back(std::move(s));
  }
  return table;
}

const char *ServiceName(Service service) {
  switch (service) {
    case kServiceModelV2:
      return "modelV2";
    case kServiceDrivingModelData:
      return "drivingModelData";
    case kServiceCameraOdometry:
      return "cameraOdometry";
  }
  return "?";
}

StatusOr<unsigned> ParseServices(const std::string &text) {
  std::string all = Trim(text);
  if (all.empty() || all == "all")
    return kAllServices;
  unsigned mask = 0;
  for (const std::string &item : Split(all, ',')) {
    std::string name = Trim(item);
    bool found = false;
    for (Service s : {kServiceModelV2, kServiceDrivingModelData, kServiceCameraOdometry}) {
      if (name == ServiceName(s)) {
        mask |= s;
        found = true;
      }
    }
    if (!found)
      return InvalidArgument("unknown service '" + name +
                             "' (known: modelV2, drivingModelData, cameraOdometry)");
  }
  return mask;
}

StatusOr<OutputParser> OutputParser::Create(const SliceTable &slices, size_t output_size,
                                            unsigned services) {
  OutputParser p;
  p.output_size_ = output_size;
  p.services_ = services;
  struct Entry {
    Known known;
    Bound *bound;
  };
  const Entry entries[] = {
      {{"plan", {kPlanWidthSingle, kPlanMhpWidth}, kMv2 | kDmd}, &p.plan_},
      {{"lane_lines", {2 * kLaneLines * kIdxN * 2, 0}, kMv2 | kDmd}, &p.lane_lines_},
      {{"lane_lines_prob", {2 * kLaneLines, 0}, kMv2 | kDmd}, &p.lane_lines_prob_},
      {{"road_edges", {2 * kRoadEdges * kIdxN * 2, 0}, kMv2}, &p.road_edges_},
      {{"lead", {kLeadWidthSingle, kLeadMhpWidth}, kMv2}, &p.lead_},
      {{"lead_prob", {kLeads, 0}, kMv2}, &p.lead_prob_},
      {{"desire_pred", {kDesirePredLen * kDesireLen, 0}, kMv2}, &p.desire_pred_},
      {{"desire_state", {kDesireLen, 0}, kMv2}, &p.desire_state_},
      {{"meta", {kMetaSize, 0}, kMv2}, &p.meta_},
      {{"pose", {12, 0}, kOdo}, &p.pose_},
      {{"wide_from_device_euler", {6, 0}, kOdo}, &p.wide_from_device_euler_},
      {{"road_transform", {12, 0}, kOdo}, &p.road_transform_},
  };
  std::string missing;
  for (const Entry &e : entries) {
    const OutputSlice *found = nullptr;
    for (const OutputSlice &s : slices)
      if (s.name == e.known.name)
        found = &s;
    if (!found) {
      if (e.known.services & services) {
        std::string needed_by;
        for (Service s : {kServiceModelV2, kServiceDrivingModelData, kServiceCameraOdometry})
          if (e.known.services & services & s)
            needed_by += std::string(needed_by.empty() ? "" : ", ") + ServiceName(s);
        missing += std::string(missing.empty() ? "" : "; ") + "'" + e.known.name + "' (needed by " +
                   needed_by + ")";
      }
      continue;
    }
    size_t width = found->end - found->start;
    if (width != e.known.widths[0] && width != e.known.widths[1]) {
      std::string expected = std::to_string(e.known.widths[0]);
      if (e.known.widths[1])
        expected += " or " + std::to_string(e.known.widths[1]);
      return InvalidArgument("slice '" + found->name + "' is " + std::to_string(width) +
                             " floats wide; the contract knows " + expected);
    }
    if (found->end > output_size)
      return InvalidArgument("slice '" + found->name + "' ends at " + std::to_string(found->end) +
                             " but the output has only " + std::to_string(output_size) + " floats");
    *e.bound = Bound{true, found->start, width};
  }
  if (!missing.empty())
    return NotFound("raw output has no slice " + missing);
  return p;
}

Status OutputParser::Parse(const float *raw, size_t size, ParsedOutputs *out) const {
  if (size != output_size_)
    return InvalidArgument("raw output has " + std::to_string(size) + " floats, expected " +
                           std::to_string(output_size_));
  auto at = [raw](const Bound &b) { return raw + b.start; };

  if (plan_.present) {
    constexpr int n = kIdxN * kPlanWidth;
    if (plan_.width == kPlanMhpWidth)
      ParseMultiHypothesis(at(plan_), kPlanHypotheses, n, 1, out->plan.data(),
                           out->plan_std.data());
    else
      ParseGaussian(at(plan_), n, out->plan.data(), out->plan_std.data());
  }
  if (lane_lines_.present)
    ParseGaussian(at(lane_lines_), kLaneLines * kIdxN * 2, out->lane_lines.data(),
                  out->lane_lines_std.data());
  if (road_edges_.present)
    ParseGaussian(at(road_edges_), kRoadEdges * kIdxN * 2, out->road_edges.data(),
                  out->road_edges_std.data());
  if (lead_.present) {
    constexpr int per_lead = kLeadSteps * kLeadWidth;
    if (lead_.width == kLeadMhpWidth)
      ParseMultiHypothesis(at(lead_), kLeadHypotheses, per_lead, kLeads, out->lead.data(),
                           out->lead_std.data());
    else
      ParseGaussian(at(lead_), kLeads * per_lead, out->lead.data(), out->lead_std.data());
  }
  if (pose_.present)
    ParseGaussian(at(pose_), 6, out->pose.data(), out->pose_std.data());
  if (wide_from_device_euler_.present)
    ParseGaussian(at(wide_from_device_euler_), 3, out->wide_from_device_euler.data(),
                  out->wide_from_device_euler_std.data());
  if (road_transform_.present)
    ParseGaussian(at(road_transform_), 6, out->road_transform.data(),
                  out->road_transform_std.data());

  auto sigmoid_all = [&](const Bound &b, float *dst) {
    if (!b.present)
      return;
    for (size_t i = 0; i < b.width; i++)
      dst[i] = Sigmoid(at(b)[i]);
  };
  sigmoid_all(lane_lines_prob_, out->lane_lines_prob.data());
  sigmoid_all(lead_prob_, out->lead_prob.data());
  sigmoid_all(meta_, out->meta.data());

  if (desire_pred_.present)
    for (int r = 0; r < kDesirePredLen; r++)
      Softmax(at(desire_pred_) + r * kDesireLen, out->desire_pred.data() + r * kDesireLen,
              kDesireLen);
  if (desire_state_.present)
    Softmax(at(desire_state_), out->desire_state.data(), kDesireLen);
  return Status::Ok();
}

}  // namespace op::drive
