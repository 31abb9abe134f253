#include "groundtruth.h"

#include <capnp/compat/json.h>
#include <capnp/message.h>
#include <kj/exception.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <limits>
#include <sstream>

namespace op::overlay {

namespace {

using capnp::JsonValue;
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

// The member `name` of a JSON object, or an invalid reader with *found false.
bool Member(JsonValue::Reader object, const char *name, JsonValue::Reader *out) {
  if (!object.isObject())
    return false;
  for (auto field : object.getObject()) {
    if (field.getName() == name) {
      *out = field.getValue();
      return true;
    }
  }
  return false;
}

// A number, or NaN for null (the file's "not known here").
bool Number(JsonValue::Reader v, float *out) {
  if (v.isNumber()) {
    *out = static_cast<float>(v.getNumber());
    return true;
  }
  if (v.isNull()) {
    *out = kNaN;
    return true;
  }
  return false;
}

// rows × kIdxN numbers (or nulls) into `out`.
template <size_t Rows>
Status Lines(JsonValue::Reader v, const char *what,
             std::array<std::array<float, drive::kIdxN>, Rows> *out) {
  if (!v.isArray() || v.getArray().size() != Rows)
    return Corrupt(std::string(what) + " is not a list of " + std::to_string(Rows) + " lines");
  for (size_t r = 0; r < Rows; r++) {
    auto line = v.getArray()[r];
    if (!line.isArray() || line.getArray().size() != drive::kIdxN)
      return Corrupt(std::string(what) + " line " + std::to_string(r) + " does not have " +
                     std::to_string(drive::kIdxN) + " points");
    for (size_t i = 0; i < drive::kIdxN; i++)
      if (!Number(line.getArray()[i], &(*out)[r][i]))
        return Corrupt(std::string(what) + " holds something that is not a number");
  }
  return Status::Ok();
}

Status ReadFrame(JsonValue::Reader f, size_t index, TruthFrame *out) {
  const std::string where = "frame " + std::to_string(index);
  JsonValue::Reader v;
  float num = 0;
  if (!Member(f, "frame_id", &v) || !v.isNumber())
    return Corrupt(where + ": no frame_id");
  out->frame_id = static_cast<int64_t>(v.getNumber());
  if (!Member(f, "timestamp_sof_ns", &v) || !v.isNumber())
    return Corrupt(where + ": no timestamp_sof_ns");
  out->sof_ns = static_cast<int64_t>(v.getNumber());
  if (!Member(f, "lane_lines_y_m", &v))
    return Corrupt(where + ": no lane_lines_y_m");
  OP_RETURN_IF_ERROR(Lines(v, "lane_lines_y_m", &out->lane_lines_y).Prepend(where));
  if (!Member(f, "road_edges_y_m", &v))
    return Corrupt(where + ": no road_edges_y_m");
  OP_RETURN_IF_ERROR(Lines(v, "road_edges_y_m", &out->road_edges_y).Prepend(where));
  out->lead_x = out->lead_y = kNaN;
  JsonValue::Reader lead;
  if (Member(f, "lead", &lead) && lead.isObject()) {
    if (Member(lead, "distance_m", &v) && Number(v, &num))
      out->lead_x = num;
    if (Member(lead, "y_m", &v) && Number(v, &num))
      out->lead_y = num;
  }
  return Status::Ok();
}

}  // namespace

const TruthFrame *GroundTruth::Find(int64_t sof_ns, int64_t tolerance_ns) const {
  auto it = std::lower_bound(frames.begin(), frames.end(), sof_ns,
                             [](const TruthFrame &f, int64_t t) { return f.sof_ns < t; });
  const TruthFrame *best = nullptr;
  int64_t best_diff = tolerance_ns;
  for (auto c : {it, it == frames.begin() ? it : it - 1}) {
    if (c == frames.end())
      continue;
    const int64_t diff = std::llabs(c->sof_ns - sof_ns);
    if (diff <= best_diff) {
      best = &*c;
      best_diff = diff;
    }
  }
  return best;
}

StatusOr<GroundTruth> LoadGroundTruth(const std::string &path) {
  std::ifstream file(path, std::ios::binary);
  if (!file)
    return NotFound("cannot open ground truth '" + path + "'");
  std::stringstream text;
  text << file.rdbuf();
  const std::string json = text.str();

  GroundTruth truth;
  Status status;
  // capnp's JSON codec reports malformed text by exception; none may leave this function.
  kj::Maybe<kj::Exception> error = kj::runCatchingExceptions([&]() {
    capnp::MallocMessageBuilder message;
    auto root = message.initRoot<JsonValue>();
    capnp::JsonCodec codec;
    codec.decodeRaw(kj::ArrayPtr<const char>(json.data(), json.size()), root);
    JsonValue::Reader top = root.asReader(), drive, v, frames;
    if (!Member(top, "drive", &drive) || !Member(top, "frames", &frames) || !frames.isArray()) {
      status = Corrupt("no \"drive\" header or \"frames\" list");
      return;
    }
    float num = 0;
    if (!Member(drive, "camera_height_m", &v) || !Number(v, &num) || !std::isfinite(num)) {
      status = Corrupt("drive.camera_height_m is missing");
      return;
    }
    truth.camera_height = num;
    if (!Member(drive, "x_idxs_m", &v) || !v.isArray() || v.getArray().size() != drive::kIdxN) {
      status = Corrupt("drive.x_idxs_m is not a list of 33 distances");
      return;
    }
    for (size_t i = 0; i < drive::kIdxN; i++)
      if (!Number(v.getArray()[i], &truth.x_idxs[i])) {
        status = Corrupt("drive.x_idxs_m holds something that is not a number");
        return;
      }
    truth.frames.resize(frames.getArray().size());
    for (size_t i = 0; i < truth.frames.size() && status.ok(); i++)
      status = ReadFrame(frames.getArray()[i], i, &truth.frames[i]);
  });
  KJ_IF_MAYBE (e, error)
    return Corrupt("ground truth '" + path +
                   "' is not valid JSON: " + std::string(e->getDescription().cStr()));
  if (!status.ok())
    return status.Prepend("ground truth '" + path + "'");
  std::stable_sort(truth.frames.begin(), truth.frames.end(),
                   [](const TruthFrame &a, const TruthFrame &b) { return a.sof_ns < b.sof_ns; });
  return truth;
}

}  // namespace op::overlay
