/**
 * SECTION:element-opoverlay
 *
 * Draws what the driving model predicts into the road camera video, the way openpilot's onroad
 * view does: the planned path, the four lane lines (opacity = their probability), the two road
 * edges (opacity = 1 − their lateral standard deviation) and the lead car. Every point goes
 * through the same camera model and calibration as opwarp's warp (K · V · R(rpy), gst/drive
 * camera presets), so the drawing lines up with what the model was shown. For the synthetic
 * sample drive, `ground-truth` also draws the true lane lines, road edges and lead in yellow.
 *
 * Pads:
 * - `video` (always): packed 4-byte RGB video in system memory (BGRx, BGRA, RGBx, RGBA, xRGB,
 *   xBGR, ARGB, ABGR); the road camera frames the model ran on, any stride (GstVideoMeta).
 * - `model` (request): the network outputs, `application/x-op-tensors` with `slices`, as
 *   oppolicy (or opvision with a combined network) produces them, in system memory (buffers
 *   still in OpenCL memory underneath are read with a queue read, not mapped). The slices are
 *   decoded with gst/drive's OutputParser; any of `plan`, `lane_lines` (+ `lane_lines_prob`),
 *   `road_edges`, `lead` (+ `lead_prob`) present is drawn.
 * - `src`: the same video with the drawing in it.
 *
 * Pairing: a video frame is drawn with the model output of the same PTS (within half a frame).
 * A frame the model did not evaluate (the frame after a drop, which opvision skips) is drawn
 * with the last prediction before it; frames before the first prediction are drawn without one.
 * The `held` and `without-prediction` statistics count them. Without a `model` pad only the
 * ground truth is drawn. When live, a frame whose prediction is not there by its deadline is
 * drawn with the last one; raise `latency` to the model's processing time to wait for it.
 *
 * ## Example
 * |[
 * gst-launch-1.0 filesrc location=fcamera.hevc ! h265parse ! avdec_h265 ! tee name=t \
 *     t. ! queue ! videoconvert ! video/x-raw,format=NV12 ! opwarp rpy=0,0.02,-0.01 ! \
 *       opvision model=models/driving_vision_small.onnx ! \
 *       oppolicy model=models/driving_policy_small.onnx ! o.model \
 *     t. ! queue max-size-bytes=0 ! videoconvert ! video/x-raw,format=BGRx ! o.video \
 *     opoverlay name=o rpy=0,0.02,-0.01 ! videoconvert ! autovideosink
 * ]|
 *
 * ## Properties
 * - `rpy` (string, "", changeable while PLAYING): calibration "roll,pitch,yaw" in radians, as
 *   opwarp's; an "op-calibration" event arriving on `video` sets it too. Empty: zeros.
 * - `device-type` (auto | tici | tizi | mici), `camera` (road | wide), `intrinsics`
 *   ("fx,fy,cx,cy"): the camera model, as opwarp's (auto goes by the frame size).
 * - `camera-height` (double, 1.22 m): height of the camera above the road; the path is drawn
 *   this far below the plan (openpilot's liveCalibration.height).
 * - `ground-truth` (string, ""): a synthetic drive's groundtruth.json to draw in yellow.
 * - read-only statistics: `frames`, `predictions`, `held`, `without-prediction`.
 */
#include "opoverlay/gstopoverlay.h"

#include <gst/video/video.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "common/gstopcamerasettings.h"
#include "common/gstopevents.h"
#include "drive/camera.h"
#include "drive/fill.h"
#include "drive/parse.h"
#include "op/gstoplatency.h"
#include "op/gstoperror.h"
#include "op/gstopcontext.h"
#include "op/gstopmemory.h"
#include "op/gstoptensor.h"
#include "opoverlay/groundtruth.h"
#include "opoverlay/overlay_draw.h"

GST_DEBUG_CATEGORY_STATIC(gst_op_overlay_debug);
#define GST_CAT_DEFAULT gst_op_overlay_debug

using op::drive::CameraRole;
using op::overlay::Colour;

#define VIDEO_CAPS GST_VIDEO_CAPS_MAKE("{ BGRx, BGRA, RGBx, RGBA, xRGB, xBGR, ARGB, ABGR }")

static GstStaticPadTemplate video_template =
    GST_STATIC_PAD_TEMPLATE("video", GST_PAD_SINK, GST_PAD_ALWAYS, GST_STATIC_CAPS(VIDEO_CAPS));
// System memory caps, as the network elements' outputs are read on the host; buffers that are
// still OpenCL memory underneath are read with a queue read (see ReadTensorMemory).
static GstStaticPadTemplate model_template = GST_STATIC_PAD_TEMPLATE(
    "model", GST_PAD_SINK, GST_PAD_REQUEST, GST_STATIC_CAPS(GST_OP_TENSOR_CAPS_NAME));
static GstStaticPadTemplate src_template =
    GST_STATIC_PAD_TEMPLATE("src", GST_PAD_SRC, GST_PAD_ALWAYS, GST_STATIC_CAPS(VIDEO_CAPS));

// ---- Enums --------------------------------------------------------------------------------

enum GstOpOverlayCamera { GST_OP_OVERLAY_CAMERA_ROAD, GST_OP_OVERLAY_CAMERA_WIDE };

static GType gst_op_overlay_camera_get_type() {
  static GType type = 0;
  static const GEnumValue values[] = {
      {GST_OP_OVERLAY_CAMERA_ROAD, "the road (narrow) camera", "road"},
      {GST_OP_OVERLAY_CAMERA_WIDE, "the wide camera", "wide"},
      {0, nullptr, nullptr}};
  if (g_once_init_enter(&type))
    g_once_init_leave(&type, g_enum_register_static("GstOpOverlayCamera", values));
  return type;
}

enum {
  PROP_0,
  PROP_RPY,
  PROP_DEVICE_TYPE,
  PROP_CAMERA,
  PROP_INTRINSICS,
  PROP_CAMERA_HEIGHT,
  PROP_GROUND_TRUTH,
  PROP_FRAMES,
  PROP_PREDICTIONS,
  PROP_HELD,
  PROP_WITHOUT_PREDICTION,
};

constexpr double kDefaultCameraHeight = 1.22;
// openpilot's onroad view draws no further than this (MAX_DRAW_DISTANCE).
constexpr double kMaxDrawDistance = 100.0;
// Half-widths of what is drawn (metres): the path is about a car wide, as openpilot draws it.
constexpr double kPathHalfWidth = 0.9;
constexpr double kLaneLineHalfWidth = 0.075;
constexpr double kRoadEdgeHalfWidth = 0.12;
constexpr double kTruthHalfWidth = 0.06;
// A lead is drawn when the model gives it at least this probability.
constexpr float kLeadMinProb = 0.5f;

// Colours: model path green, lane lines white, road edges red, lead orange; truth yellow.
constexpr Colour kPathColour{40, 200, 90, 0.5f};
constexpr Colour kLaneColour{255, 255, 255, 1.0f};
constexpr Colour kEdgeColour{230, 40, 40, 1.0f};
constexpr Colour kLeadColour{255, 110, 20, 0.8f};
constexpr Colour kTruthColour{255, 220, 0, 0.85f};

// ---- State --------------------------------------------------------------------------------

// What the properties and events set; read by the streaming thread. Guarded by Impl::lock.
struct Settings {
  std::string rpy_string;
  op::drive::Rpy rpy;
  GstOpDeviceType device_type = GST_OP_DEVICE_TYPE_AUTO;
  GstOpOverlayCamera camera = GST_OP_OVERLAY_CAMERA_ROAD;
  std::string intrinsics_string;
  std::optional<op::drive::Intrinsics> intrinsics;
  double camera_height = kDefaultCameraHeight;
  std::string ground_truth;
};

// The model stream's layout: where each tensor starts in one float array, and the parser of
// its slice table. Rebuilt on every caps event of `model`.
struct ModelLayout {
  GstOpTensorInfo info;
  std::vector<size_t> base;  // first float of each tensor
  std::optional<op::drive::OutputParser> parser;
  std::vector<float> raw;
  std::vector<uint16_t> half;  // a float16 tensor before conversion
  bool plan = false, lane_lines = false, lane_lines_prob = false, road_edges = false, lead = false,
       lead_prob = false;
};

struct Impl {
  std::mutex lock;
  Settings settings;
  GstOpSettingWarnings warnings;  // refused settings, kept until start without a bus

  // Streaming thread only.
  std::unique_ptr<ModelLayout> model;
  op::drive::ParsedOutputs last{};
  bool have_last = false;
  GstVideoInfo video_info;
  bool have_video_info = false;
  op::drive::Intrinsics camera{};
  std::optional<op::overlay::GroundTruth> truth;

  std::atomic<guint64> frames{0}, predictions{0}, held{0}, without_prediction{0};
};

struct _GstOpOverlay {
  GstAggregator parent;
  GstAggregatorPad *video_pad;
  GstAggregatorPad *model_pad;  // null until requested; guarded by the object lock
  Impl *impl;
};

#define gst_op_overlay_parent_class parent_class
G_DEFINE_TYPE(GstOpOverlay, gst_op_overlay, GST_TYPE_AGGREGATOR);
GST_ELEMENT_REGISTER_DEFINE(opoverlay, "opoverlay", GST_RANK_NONE, GST_TYPE_OP_OVERLAY);

// ---- Properties ---------------------------------------------------------------------------

static void SetRpy(GstOpOverlay *self, const std::string &text) {
  Impl &impl = *self->impl;
  op::drive::Rpy rpy;
  if (gst_op_camera_settings_parse_rpy(GST_ELEMENT(self), impl.warnings, text, &rpy) ==
      GstOpSettingChange::kRefused)
    return;
  std::lock_guard<std::mutex> guard(impl.lock);
  impl.settings.rpy_string = text;
  impl.settings.rpy = rpy;
}

static void SetIntrinsics(GstOpOverlay *self, const std::string &text) {
  Impl &impl = *self->impl;
  op::drive::Intrinsics k;
  const GstOpSettingChange change =
      gst_op_camera_settings_parse_intrinsics(GST_ELEMENT(self), impl.warnings, text, &k);
  if (change == GstOpSettingChange::kRefused)
    return;
  std::lock_guard<std::mutex> guard(impl.lock);
  impl.settings.intrinsics_string = text;
  impl.settings.intrinsics = change == GstOpSettingChange::kSet ? std::optional(k) : std::nullopt;
}

static void SetProperty(GObject *object, guint prop_id, const GValue *value, GParamSpec *pspec) {
  auto *self = GST_OP_OVERLAY(object);
  Impl &impl = *self->impl;
  switch (prop_id) {
    case PROP_RPY: {
      const char *s = g_value_get_string(value);
      SetRpy(self, s ? s : "");
      break;
    }
    case PROP_INTRINSICS: {
      const char *s = g_value_get_string(value);
      SetIntrinsics(self, s ? s : "");
      break;
    }
    case PROP_DEVICE_TYPE: {
      std::lock_guard<std::mutex> guard(impl.lock);
      impl.settings.device_type = GstOpDeviceType(g_value_get_enum(value));
      break;
    }
    case PROP_CAMERA: {
      std::lock_guard<std::mutex> guard(impl.lock);
      impl.settings.camera = GstOpOverlayCamera(g_value_get_enum(value));
      break;
    }
    case PROP_CAMERA_HEIGHT: {
      std::lock_guard<std::mutex> guard(impl.lock);
      impl.settings.camera_height = g_value_get_double(value);
      break;
    }
    case PROP_GROUND_TRUTH: {
      const char *s = g_value_get_string(value);
      std::lock_guard<std::mutex> guard(impl.lock);
      impl.settings.ground_truth = s ? s : "";
      break;
    }
    default:
      G_OBJECT_WARN_INVALID_PROPERTY_ID(object, prop_id, pspec);
  }
}

static void GetProperty(GObject *object, guint prop_id, GValue *value, GParamSpec *pspec) {
  auto *self = GST_OP_OVERLAY(object);
  Impl &impl = *self->impl;
  std::lock_guard<std::mutex> guard(impl.lock);
  switch (prop_id) {
    case PROP_RPY:
      g_value_set_string(value, impl.settings.rpy_string.c_str());
      break;
    case PROP_INTRINSICS:
      g_value_set_string(value, impl.settings.intrinsics_string.c_str());
      break;
    case PROP_DEVICE_TYPE:
      g_value_set_enum(value, impl.settings.device_type);
      break;
    case PROP_CAMERA:
      g_value_set_enum(value, impl.settings.camera);
      break;
    case PROP_CAMERA_HEIGHT:
      g_value_set_double(value, impl.settings.camera_height);
      break;
    case PROP_GROUND_TRUTH:
      g_value_set_string(value, impl.settings.ground_truth.c_str());
      break;
    case PROP_FRAMES:
      g_value_set_uint64(value, impl.frames);
      break;
    case PROP_PREDICTIONS:
      g_value_set_uint64(value, impl.predictions);
      break;
    case PROP_HELD:
      g_value_set_uint64(value, impl.held);
      break;
    case PROP_WITHOUT_PREDICTION:
      g_value_set_uint64(value, impl.without_prediction);
      break;
    default:
      G_OBJECT_WARN_INVALID_PROPERTY_ID(object, prop_id, pspec);
  }
}

// ---- Negotiation --------------------------------------------------------------------------

// The camera model for frames of the negotiated size, from the settings; false (with an error
// posted) when neither a preset nor `intrinsics` fits.
static bool ResolveCamera(GstOpOverlay *self, int width, int height) {
  Settings s;
  {
    std::lock_guard<std::mutex> guard(self->impl->lock);
    s = self->impl->settings;
  }
  // Presets for another frame size would draw everything in the wrong place: that is an error.
  auto resolved = gst_op_camera_settings_resolve(
      s.device_type, s.camera == GST_OP_OVERLAY_CAMERA_WIDE ? CameraRole::kWide : CameraRole::kRoad,
      s.intrinsics, width, height);
  if (!resolved.ok()) {
    GST_ELEMENT_ERROR(self, CORE, NEGOTIATION, ("%s", resolved.status().message().c_str()),
                      ("%dx%d video", width, height));
    return false;
  }
  self->impl->camera = *resolved;
  return true;
}

static GstFlowReturn UpdateSrcCaps(GstAggregator *agg, GstCaps *downstream, GstCaps **ret) {
  auto *self = GST_OP_OVERLAY(agg);
  GstCaps *video = gst_pad_get_current_caps(GST_PAD(self->video_pad));
  if (!video)
    return GST_AGGREGATOR_FLOW_NEED_DATA;
  if (!gst_caps_can_intersect(video, downstream)) {
    GST_ELEMENT_ERROR(
        self, CORE, NEGOTIATION, ("Downstream does not accept the video opoverlay draws on."),
        ("video %" GST_PTR_FORMAT ", downstream accepts %" GST_PTR_FORMAT, video, downstream));
    gst_caps_unref(video);
    return GST_FLOW_NOT_NEGOTIATED;
  }
  *ret = video;
  return GST_FLOW_OK;
}

static gboolean NegotiatedSrcCaps(GstAggregator *agg, GstCaps *caps) {
  auto *self = GST_OP_OVERLAY(agg);
  Impl &impl = *self->impl;
  if (!gst_video_info_from_caps(&impl.video_info, caps)) {
    GST_ELEMENT_ERROR(self, CORE, NEGOTIATION, ("Unreadable video caps."),
                      ("%" GST_PTR_FORMAT, caps));
    return FALSE;
  }
  if (!ResolveCamera(self, GST_VIDEO_INFO_WIDTH(&impl.video_info),
                     GST_VIDEO_INFO_HEIGHT(&impl.video_info)))
    return FALSE;
  impl.have_video_info = true;
  return GST_AGGREGATOR_CLASS(parent_class)->negotiated_src_caps(agg, caps);
}

// The model stream's caps → its float layout and parser. Only the slices that are drawn are
// looked at; a stream with none of them cannot be drawn and is refused.
static bool SetModelCaps(GstOpOverlay *self, GstCaps *caps) {
  auto info = gst_op_tensor_info_from_caps(caps);
  if (!info.ok()) {
    GST_OP_ELEMENT_ERROR_STATUS(self, info.status(), CORE, NEGOTIATION,
                                ("The model input is not a tensor stream."));
    return false;
  }
  auto layout = std::make_unique<ModelLayout>();
  layout->info = *info;
  size_t total = 0;
  for (const GstOpTensorDesc &t : layout->info.tensors) {
    if (t.type != GstOpTensorType::kFloat32 && t.type != GstOpTensorType::kFloat16) {
      GST_ELEMENT_ERROR(self, CORE, NEGOTIATION, ("The network output must be floats."),
                        ("tensor \"%s\" is %s, not float32 or float16", t.name.c_str(),
                         gst_op_tensor_type_to_string(t.type)));
      return false;
    }
    layout->base.push_back(total);
    total += static_cast<size_t>(t.elements());
  }
  op::drive::SliceTable table;
  for (const GstOpTensorSlice &s : layout->info.slices) {
    const int index = s.tensor.empty() ? 0 : layout->info.Find(s.tensor);
    if (index < 0)
      continue;
    const GstOpTensorDesc &t = layout->info.tensors[index];
    // Slices run along the last axis; with more than one row they would not be contiguous.
    if (t.elements() != t.dims.back()) {
      GST_ELEMENT_ERROR(self, CORE, NEGOTIATION, ("The network output has an unexpected shape."),
                        ("slice \"%s\" of tensor \"%s\": only (1, ..., N) tensors are sliced",
                         s.name.c_str(), t.name.c_str()));
      return false;
    }
    table.push_back({s.name, layout->base[index] + static_cast<size_t>(s.start),
                     layout->base[index] + static_cast<size_t>(s.end)});
  }
  // No service: the parser then requires nothing and decodes what is there, checking widths.
  auto parser = op::drive::OutputParser::Create(table, total, 0);
  if (!parser.ok()) {
    GST_ELEMENT_ERROR(
        self, CORE, NEGOTIATION,
        ("The network output cannot be decoded: %s", parser.status().message().c_str()),
        ("%s; caps %" GST_PTR_FORMAT, parser.status().ToString().c_str(), caps));
    return false;
  }
  for (const auto &s : table) {
    layout->plan |= s.name == "plan";
    layout->lane_lines |= s.name == "lane_lines";
    layout->lane_lines_prob |= s.name == "lane_lines_prob";
    layout->road_edges |= s.name == "road_edges";
    layout->lead |= s.name == "lead";
    layout->lead_prob |= s.name == "lead_prob";
  }
  if (!layout->plan && !layout->lane_lines && !layout->road_edges && !layout->lead) {
    GST_ELEMENT_ERROR(self, CORE, NEGOTIATION,
                      ("The network output has nothing opoverlay draws: it needs a \"plan\", "
                       "\"lane_lines\", \"road_edges\" or \"lead\" slice."),
                      ("caps %" GST_PTR_FORMAT, caps));
    return false;
  }
  layout->parser.emplace(std::move(*parser));
  layout->raw.resize(total);
  self->impl->model = std::move(layout);
  return true;
}

// Decodes one model buffer into *out (through the layout's float array).
static bool ParseModelBuffer(GstOpOverlay *self, GstBuffer *buffer, op::drive::ParsedOutputs *out) {
  ModelLayout *layout = self->impl->model.get();
  if (!layout) {
    GST_ELEMENT_ERROR(self, CORE, NEGOTIATION, ("The model stream sent data before its caps."),
                      (nullptr));
    return false;
  }
  const auto &tensors = layout->info.tensors;
  if (gst_buffer_n_memory(buffer) != tensors.size()) {
    GST_ELEMENT_ERROR(self, STREAM, FORMAT, ("A model buffer does not match its caps."),
                      ("%u memories for %zu tensors", gst_buffer_n_memory(buffer), tensors.size()));
    return false;
  }
  for (size_t i = 0; i < tensors.size(); i++) {
    op::Status read =
        gst_op_tensor_read_floats(gst_buffer_peek_memory(buffer, i), tensors[i],
                                  layout->raw.data() + layout->base[i], &layout->half);
    if (!read.ok()) {
      GST_ELEMENT_ERROR(self, STREAM, FORMAT, ("Could not read a model output tensor."),
                        ("tensor \"%s\": %s", tensors[i].name.c_str(), read.ToString().c_str()));
      return false;
    }
  }
  op::Status st = layout->parser->Parse(layout->raw.data(), layout->raw.size(), out);
  if (!st.ok()) {
    GST_OP_ELEMENT_ERROR_STATUS(self, st, STREAM, FORMAT, ("Could not decode the network output."));
    return false;
  }
  return true;
}

// ---- Drawing ------------------------------------------------------------------------------

static void DrawPrediction(op::overlay::Image &image, const op::overlay::Projector &projector,
                           const ModelLayout &layout, const op::drive::ParsedOutputs &p,
                           double camera_height) {
  using namespace op::drive;
  const std::array<float, kIdxN> &xs = XIdxs();
  float x[kIdxN], y[kIdxN], z[kIdxN];
  if (layout.road_edges) {
    for (int e = 0; e < kRoadEdges; e++) {
      for (int i = 0; i < kIdxN; i++) {
        x[i] = xs[i];
        y[i] = p.RoadEdge(e, i, 0);
        z[i] = p.RoadEdge(e, i, 1);
      }
      Colour c = kEdgeColour;
      c.alpha = std::clamp(1.0f - p.road_edges_std[(e * kIdxN) * 2], 0.0f, 1.0f);
      DrawRibbon(image, projector, x, y, z, kIdxN, kRoadEdgeHalfWidth, 0.0, kMaxDrawDistance, c);
    }
  }
  if (layout.lane_lines) {
    for (int l = 0; l < kLaneLines; l++) {
      for (int i = 0; i < kIdxN; i++) {
        x[i] = xs[i];
        y[i] = p.LaneLine(l, i, 0);
        z[i] = p.LaneLine(l, i, 1);
      }
      Colour c = kLaneColour;
      // laneLineProbs = lane_lines_prob[1::2] (docs/contract.md, filling the messages).
      c.alpha = layout.lane_lines_prob ? std::clamp(p.lane_lines_prob[2 * l + 1], 0.0f, 1.0f) : 1;
      DrawRibbon(image, projector, x, y, z, kIdxN, kLaneLineHalfWidth, 0.0, kMaxDrawDistance, c);
    }
  }
  if (layout.plan) {
    for (int i = 0; i < kIdxN; i++) {
      x[i] = p.Plan(i, kPlanPosition);
      y[i] = p.Plan(i, kPlanPosition + 1);
      z[i] = p.Plan(i, kPlanPosition + 2);
    }
    // The plan is the car's motion at camera height; openpilot draws it on the road below.
    DrawRibbon(image, projector, x, y, z, kIdxN, kPathHalfWidth, camera_height, kMaxDrawDistance,
               kPathColour);
  }
  if (layout.lead && (!layout.lead_prob || p.lead_prob[0] >= kLeadMinProb))
    DrawLead(image, projector, p.Lead(0, 0, 0), p.Lead(0, 0, 1), camera_height, 1.8, 1.2,
             kLeadColour);
}

static void DrawTruth(op::overlay::Image &image, const op::overlay::Projector &projector,
                      const op::overlay::GroundTruth &truth, const op::overlay::TruthFrame &f) {
  using namespace op::drive;
  float z[kIdxN];
  std::fill(z, z + kIdxN, static_cast<float>(truth.camera_height));
  for (const auto &line : f.lane_lines_y)
    DrawRibbon(image, projector, truth.x_idxs.data(), line.data(), z, kIdxN, kTruthHalfWidth, 0.0,
               kMaxDrawDistance, kTruthColour);
  for (const auto &edge : f.road_edges_y)
    DrawRibbon(image, projector, truth.x_idxs.data(), edge.data(), z, kIdxN, kTruthHalfWidth, 0.0,
               kMaxDrawDistance, kTruthColour);
  Colour lead = kTruthColour;
  lead.alpha = 0.5f;
  DrawLead(image, projector, f.lead_x, f.lead_y, truth.camera_height, 1.8, 1.2, lead);
}

static GstFlowReturn Draw(GstOpOverlay *self, GstBuffer *buffer,
                          const op::drive::ParsedOutputs *prediction) {
  Impl &impl = *self->impl;
  Settings s;
  {
    std::lock_guard<std::mutex> guard(impl.lock);
    s = impl.settings;
  }
  GstVideoFrame frame;
  if (!gst_video_frame_map(&frame, &impl.video_info, buffer, GST_MAP_READWRITE)) {
    GST_ELEMENT_ERROR(
        self, STREAM, FORMAT, ("Could not map a video frame for drawing."),
        ("buffer of %zu bytes for %dx%d video", gst_buffer_get_size(buffer),
         GST_VIDEO_INFO_WIDTH(&impl.video_info), GST_VIDEO_INFO_HEIGHT(&impl.video_info)));
    return GST_FLOW_ERROR;
  }
  op::overlay::Image image;
  image.data = static_cast<uint8_t *>(GST_VIDEO_FRAME_PLANE_DATA(&frame, 0));
  image.width = GST_VIDEO_FRAME_WIDTH(&frame);
  image.height = GST_VIDEO_FRAME_HEIGHT(&frame);
  image.stride = GST_VIDEO_FRAME_PLANE_STRIDE(&frame, 0);
  image.r = GST_VIDEO_FRAME_COMP_POFFSET(&frame, GST_VIDEO_COMP_R);
  image.g = GST_VIDEO_FRAME_COMP_POFFSET(&frame, GST_VIDEO_COMP_G);
  image.b = GST_VIDEO_FRAME_COMP_POFFSET(&frame, GST_VIDEO_COMP_B);
  const op::overlay::Projector projector(impl.camera, s.rpy);

  if (impl.truth && GST_BUFFER_PTS_IS_VALID(buffer)) {
    const GstClockTime half =
        GST_VIDEO_INFO_FPS_N(&impl.video_info) > 0
            ? gst_util_uint64_scale(GST_SECOND, GST_VIDEO_INFO_FPS_D(&impl.video_info),
                                    2 * GST_VIDEO_INFO_FPS_N(&impl.video_info))
            : 25 * GST_MSECOND;
    const op::overlay::TruthFrame *f =
        impl.truth->Find(static_cast<int64_t>(GST_BUFFER_PTS(buffer)), half);
    if (f)
      DrawTruth(image, projector, *impl.truth, *f);
  }
  if (prediction && impl.model)
    DrawPrediction(image, projector, *impl.model, *prediction, s.camera_height);
  gst_video_frame_unmap(&frame);
  return GST_FLOW_OK;
}

// ---- Aggregation --------------------------------------------------------------------------

// Half a frame at the negotiated rate (25 ms when it is unknown): model outputs this close to a
// frame's PTS belong to it.
static GstClockTime PairTolerance(Impl &impl) {
  const int n = GST_VIDEO_INFO_FPS_N(&impl.video_info), d = GST_VIDEO_INFO_FPS_D(&impl.video_info);
  if (!impl.have_video_info || n <= 0 || d <= 0)
    return 25 * GST_MSECOND;
  return gst_util_uint64_scale(GST_SECOND, d, 2 * n);
}

static GstFlowReturn Aggregate(GstAggregator *agg, gboolean timeout) {
  auto *self = GST_OP_OVERLAY(agg);
  Impl &impl = *self->impl;
  GstBuffer *video = gst_aggregator_pad_peek_buffer(self->video_pad);
  if (!video)
    return gst_aggregator_pad_is_eos(self->video_pad) ? GST_FLOW_EOS
                                                      : GST_AGGREGATOR_FLOW_NEED_DATA;
  const GstClockTime pts = GST_BUFFER_PTS(video);
  gst_buffer_unref(video);
  if (!impl.have_video_info)
    return GST_AGGREGATOR_FLOW_NEED_DATA;

  GST_OBJECT_LOCK(self);
  GstAggregatorPad *model_pad =
      self->model_pad ? GST_AGGREGATOR_PAD(gst_object_ref(self->model_pad)) : nullptr;
  GST_OBJECT_UNLOCK(self);

  bool fresh = false;
  if (model_pad) {
    const GstClockTime tolerance = PairTolerance(impl);
    while (GstBuffer *m = gst_aggregator_pad_peek_buffer(model_pad)) {
      const GstClockTime mpts = GST_BUFFER_PTS(m);
      gst_buffer_unref(m);
      const bool timed = GST_CLOCK_TIME_IS_VALID(mpts) && GST_CLOCK_TIME_IS_VALID(pts);
      // A later frame's output stays queued: this frame was not evaluated.
      if (timed && mpts > pts + tolerance)
        break;
      GstBuffer *taken = gst_aggregator_pad_pop_buffer(model_pad);
      const bool ok = ParseModelBuffer(self, taken, &impl.last);
      gst_buffer_unref(taken);
      if (!ok) {
        gst_object_unref(model_pad);
        return GST_FLOW_ERROR;
      }
      impl.have_last = true;
      // An output older than this frame (its own frame was never seen) is only remembered.
      if (!timed || mpts + tolerance >= pts) {
        fresh = true;
        break;
      }
    }
    // Neither this frame's output nor a later one has arrived: wait for it, unless the model
    // stream ended or (live) the deadline passed.
    const bool wait = !fresh && !timeout && !gst_aggregator_pad_is_eos(model_pad) &&
                      !gst_aggregator_pad_has_buffer(model_pad);
    gst_object_unref(model_pad);
    if (wait)
      return GST_AGGREGATOR_FLOW_NEED_DATA;
  }

  GstBuffer *out = gst_aggregator_pad_pop_buffer(self->video_pad);
  if (!out)
    return GST_AGGREGATOR_FLOW_NEED_DATA;
  out = gst_buffer_make_writable(out);
  impl.frames++;
  if (fresh)
    impl.predictions++;
  else if (impl.have_last)
    impl.held++;
  else
    impl.without_prediction++;
  GstFlowReturn ret = Draw(self, out, impl.have_last ? &impl.last : nullptr);
  if (ret != GST_FLOW_OK) {
    gst_buffer_unref(out);
    return ret;
  }
  return gst_aggregator_finish_buffer(agg, out);
}

// ---- Events, pads, state ------------------------------------------------------------------

static gboolean SinkEvent(GstAggregator *agg, GstAggregatorPad *pad, GstEvent *event) {
  auto *self = GST_OP_OVERLAY(agg);
  if (GST_EVENT_TYPE(event) == GST_EVENT_CAPS) {
    GstCaps *caps = nullptr;
    gst_event_parse_caps(event, &caps);
    if (pad == self->video_pad) {
      // The output follows the video: renegotiate before the next frame.
      gst_pad_mark_reconfigure(GST_AGGREGATOR_SRC_PAD(agg));
    } else if (!SetModelCaps(self, caps)) {
      gst_event_unref(event);
      return FALSE;
    }
  } else if (pad == self->video_pad) {
    gdouble roll = 0, pitch = 0, yaw = 0;
    if (gst_op_calibration_event_parse(event, &roll, &pitch, &yaw)) {
      std::lock_guard<std::mutex> guard(self->impl->lock);
      self->impl->settings.rpy = {roll, pitch, yaw};
      self->impl->settings.rpy_string = op::drive::FormatRpy(self->impl->settings.rpy);
    }
  }
  return GST_AGGREGATOR_CLASS(parent_class)->sink_event(agg, pad, event);
}

static gboolean SinkQuery(GstAggregator *agg, GstAggregatorPad *pad, GstQuery *query) {
  auto *self = GST_OP_OVERLAY(agg);
  if (pad == self->video_pad && GST_QUERY_TYPE(query) == GST_QUERY_ALLOCATION) {
    // We draw through GstVideoFrame, which follows a video meta's strides and offsets.
    gst_query_add_allocation_meta(query, GST_VIDEO_META_API_TYPE, nullptr);
    return TRUE;
  }
  return GST_AGGREGATOR_CLASS(parent_class)->sink_query(agg, pad, query);
}

static gboolean Start(GstAggregator *agg) {
  auto *self = GST_OP_OVERLAY(agg);
  Impl &impl = *self->impl;
  impl.warnings.Post(GST_ELEMENT(self));
  std::string path;
  {
    std::lock_guard<std::mutex> guard(impl.lock);
    path = impl.settings.ground_truth;
  }
  impl.truth.reset();
  if (!path.empty()) {
    auto truth = op::overlay::LoadGroundTruth(path);
    if (!truth.ok()) {
      if (truth.status().code() == op::StatusCode::kNotFound)
        GST_OP_ELEMENT_ERROR_STATUS(self, truth.status(), RESOURCE, NOT_FOUND,
                                    ("Ground truth file \"%s\" not found.", path.c_str()));
      else
        GST_OP_ELEMENT_ERROR_STATUS(self, truth.status(), RESOURCE, READ,
                                    ("Could not read the ground truth file \"%s\".", path.c_str()));
      return FALSE;
    }
    impl.truth.emplace(std::move(*truth));
    GST_INFO_OBJECT(self, "ground truth: %zu frames from %s", impl.truth->frames.size(),
                    path.c_str());
  }
  impl.have_last = false;
  impl.frames = impl.predictions = impl.held = impl.without_prediction = 0;
  return TRUE;
}

static gboolean Stop(GstAggregator *agg) {
  Impl &impl = *GST_OP_OVERLAY(agg)->impl;
  impl.model.reset();
  impl.truth.reset();
  impl.have_last = false;
  impl.have_video_info = false;
  return TRUE;
}

static GstFlowReturn Flush(GstAggregator *agg) {
  // After a seek the last prediction belongs to another place in the drive.
  GST_OP_OVERLAY(agg)->impl->have_last = false;
  return GST_FLOW_OK;
}

static GstAggregatorPad *CreateNewPad(GstAggregator *agg, GstPadTemplate *templ,
                                      const gchar *req_name, const GstCaps *caps) {
  auto *self = GST_OP_OVERLAY(agg);
  if (g_strcmp0(GST_PAD_TEMPLATE_NAME_TEMPLATE(templ), "model") != 0)
    return nullptr;
  GST_OBJECT_LOCK(self);
  const bool exists = self->model_pad != nullptr;
  GST_OBJECT_UNLOCK(self);
  if (exists) {
    GST_WARNING_OBJECT(self, "model is already requested");
    return nullptr;
  }
  auto *pad = GST_AGGREGATOR_PAD(g_object_new(GST_TYPE_AGGREGATOR_PAD, "name", "model", "direction",
                                              GST_PAD_SINK, "template", templ, nullptr));
  GST_OBJECT_LOCK(self);
  self->model_pad = pad;
  GST_OBJECT_UNLOCK(self);
  return pad;
}

static void ReleasePad(GstElement *element, GstPad *pad) {
  auto *self = GST_OP_OVERLAY(element);
  GST_OBJECT_LOCK(self);
  if (GST_AGGREGATOR_PAD(pad) == self->model_pad)
    self->model_pad = nullptr;
  GST_OBJECT_UNLOCK(self);
  GST_ELEMENT_CLASS(parent_class)->release_pad(element, pad);
}

static void Finalize(GObject *object) {
  delete GST_OP_OVERLAY(object)->impl;
  G_OBJECT_CLASS(parent_class)->finalize(object);
}

static void gst_op_overlay_class_init(GstOpOverlayClass *klass) {
  GObjectClass *gobject_class = G_OBJECT_CLASS(klass);
  GstElementClass *element_class = GST_ELEMENT_CLASS(klass);
  GstAggregatorClass *agg_class = GST_AGGREGATOR_CLASS(klass);

  gobject_class->set_property = SetProperty;
  gobject_class->get_property = GetProperty;
  gobject_class->finalize = Finalize;

  const auto ready =
      GParamFlags(G_PARAM_READWRITE | G_PARAM_STATIC_STRINGS | GST_PARAM_MUTABLE_READY);
  const auto playing =
      GParamFlags(G_PARAM_READWRITE | G_PARAM_STATIC_STRINGS | GST_PARAM_MUTABLE_PLAYING);
  g_object_class_install_property(
      gobject_class, PROP_RPY,
      g_param_spec_string("rpy", "Calibration",
                          "\"roll,pitch,yaw\" in radians (liveCalibration.rpyCalib), as opwarp's; "
                          "an op-calibration event on the video pad sets it too; empty: zeros",
                          "", playing));
  g_object_class_install_property(
      gobject_class, PROP_DEVICE_TYPE,
      g_param_spec_enum("device-type", "Device type",
                        "Camera presets of the comma device (auto: from the frame size, "
                        "1928x1208 tici, 1344x760 mici)",
                        GST_TYPE_OP_DEVICE_TYPE, GST_OP_DEVICE_TYPE_AUTO, ready));
  g_object_class_install_property(
      gobject_class, PROP_CAMERA,
      g_param_spec_enum("camera", "Camera", "Whose preset intrinsics the video was taken with",
                        gst_op_overlay_camera_get_type(), GST_OP_OVERLAY_CAMERA_ROAD, ready));
  g_object_class_install_property(
      gobject_class, PROP_INTRINSICS,
      g_param_spec_string("intrinsics", "Intrinsics",
                          "\"fx,fy,cx,cy\" in pixels of the video's camera (any frame size); "
                          "empty: the presets",
                          "", ready));
  g_object_class_install_property(
      gobject_class, PROP_CAMERA_HEIGHT,
      g_param_spec_double("camera-height", "Camera height",
                          "Height of the camera above the road (m); the path is drawn on the road",
                          0.0, 10.0, kDefaultCameraHeight, playing));
  g_object_class_install_property(
      gobject_class, PROP_GROUND_TRUTH,
      g_param_spec_string("ground-truth", "Ground truth",
                          "A synthetic drive's groundtruth.json (samples/drive/README.md) whose "
                          "lane lines, road edges and lead are drawn in yellow; empty: none",
                          "", ready));
  gst_op_install_stat(gobject_class, PROP_FRAMES, "frames", "Video frames drawn");
  gst_op_install_stat(gobject_class, PROP_PREDICTIONS, "predictions",
                      "Frames drawn with the model output of the same frame");
  gst_op_install_stat(
      gobject_class, PROP_HELD, "held",
      "Frames without their own model output (skipped after a drop, or late when live), "
      "drawn with the last prediction");
  gst_op_install_stat(gobject_class, PROP_WITHOUT_PREDICTION, "without-prediction",
                      "Frames before the first model output, drawn without a prediction");

  gst_element_class_add_static_pad_template_with_gtype(element_class, &video_template,
                                                       GST_TYPE_AGGREGATOR_PAD);
  gst_element_class_add_static_pad_template_with_gtype(element_class, &model_template,
                                                       GST_TYPE_AGGREGATOR_PAD);
  gst_element_class_add_static_pad_template_with_gtype(element_class, &src_template,
                                                       GST_TYPE_AGGREGATOR_PAD);
  gst_element_class_set_static_metadata(
      element_class, "openpilot prediction overlay", "Filter/Editor/Video",
      "Draws the driving model's path, lane lines, road edges and lead (and a synthetic drive's "
      "ground truth) into the road camera video through the calibration and camera model",
      "gst-op");

  element_class->release_pad = ReleasePad;
  agg_class->start = Start;
  agg_class->stop = Stop;
  agg_class->flush = Flush;
  agg_class->aggregate = Aggregate;
  agg_class->sink_event = SinkEvent;
  agg_class->sink_query = SinkQuery;
  agg_class->update_src_caps = UpdateSrcCaps;
  agg_class->negotiated_src_caps = NegotiatedSrcCaps;
  agg_class->create_new_pad = CreateNewPad;
  agg_class->get_next_time = gst_aggregator_simple_get_next_time;

  gst_type_mark_as_plugin_api(GST_TYPE_OP_DEVICE_TYPE, (GstPluginAPIFlags)0);
  gst_type_mark_as_plugin_api(gst_op_overlay_camera_get_type(), (GstPluginAPIFlags)0);
  GST_DEBUG_CATEGORY_INIT(gst_op_overlay_debug, "opoverlay", 0, "openpilot prediction overlay");
}

static void gst_op_overlay_init(GstOpOverlay *self) {
  self->impl = new Impl();
  gst_video_info_init(&self->impl->video_info);
  GstPadTemplate *templ = gst_element_class_get_pad_template(GST_ELEMENT_GET_CLASS(self), "video");
  self->video_pad =
      GST_AGGREGATOR_PAD(g_object_new(GST_TYPE_AGGREGATOR_PAD, "name", "video", "direction",
                                      GST_PAD_SINK, "template", templ, nullptr));
  gst_element_add_pad(GST_ELEMENT(self), GST_PAD(self->video_pad));
  self->model_pad = nullptr;
}
