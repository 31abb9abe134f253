// opoverlay with GstHarness: a known straight path, lane lines of known probability and a ground
// truth land on the pixels the camera model puts them on; frames without their own prediction
// are drawn with the last one (or none before the first); a model stream without anything to
// draw is refused by name. The expected pixels are projected here by hand from K, V and R(rpy)
// (docs/contract.md), not with gst/drive's camera code that the element uses.
#include <gst/check/gstharness.h>
#include <gst/gst.h>
#include <glib/gstdio.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "op/gstoptensor.h"

namespace {

constexpr int kW = 1928, kH = 1208;  // tici road camera
constexpr double kFocal = 2648.0;
constexpr double kRoll = 0.01, kPitch = 0.03, kYaw = -0.02;
constexpr double kCameraHeight = 1.22;  // the element's default
constexpr const char *kVideoCaps = "video/x-raw,format=BGRx,width=1928,height=1208,framerate=20/1";

// Camera pixel of a calibrated-frame point (x forward, y right, z down): device = R(rpy)·p with
// R = Rz(yaw)·Ry(pitch)·Rx(roll); view = (device y, device z, device x); pixel = K·view / depth.
void Project(double x, double y, double z, double *u, double *v) {
  const double cr = std::cos(kRoll), sr = std::sin(kRoll), cp = std::cos(kPitch),
               sp = std::sin(kPitch), cy = std::cos(kYaw), sy = std::sin(kYaw);
  // Rx(roll)
  const double x1 = x, y1 = cr * y - sr * z, z1 = sr * y + cr * z;
  // Ry(pitch)
  const double x2 = cp * x1 + sp * z1, y2 = y1, z2 = -sp * x1 + cp * z1;
  // Rz(yaw)
  const double dx = cy * x2 - sy * y2, dy = sy * x2 + cy * y2, dz = z2;
  *u = kFocal * dy / dx + kW / 2.0;
  *v = kFocal * dz / dx + kH / 2.0;
}

struct Bgr {
  int b, g, r;
};

Bgr PixelAt(GstBuffer *buf, double u, double v) {
  GstMapInfo map;
  EXPECT_TRUE(gst_buffer_map(buf, &map, GST_MAP_READ));
  const int col = static_cast<int>(std::floor(u)), row = static_cast<int>(std::floor(v));
  EXPECT_TRUE(col >= 0 && col < kW && row >= 0 && row < kH) << u << "," << v;
  const uint8_t *p = map.data + (static_cast<size_t>(row) * kW + col) * 4;
  Bgr c{p[0], p[1], p[2]};
  gst_buffer_unmap(buf, &map);
  return c;
}

// Pixel (u, v) of the projection of (x, y, z).
Bgr ProjectedPixel(GstBuffer *buf, double x, double y, double z) {
  double u = 0, v = 0;
  Project(x, y, z, &u, &v);
  return PixelAt(buf, u, v);
}

GstBuffer *BlackFrame(GstClockTime pts) {
  GstBuffer *buf = gst_buffer_new_allocate(nullptr, size_t(kW) * kH * 4, nullptr);
  gst_buffer_memset(buf, 0, 0, size_t(kW) * kH * 4);
  GST_BUFFER_PTS(buf) = pts;
  GST_BUFFER_DURATION(buf) = 50 * GST_MSECOND;
  return buf;
}

// One float32 tensor "outputs" (1, n) with the given slices.
GstCaps *ModelCaps(size_t n, const std::vector<GstOpTensorSlice> &slices) {
  GstOpTensorInfo info;
  GstOpTensorDesc d;
  d.name = "outputs";
  d.type = GstOpTensorType::kFloat32;
  d.dims = {1, static_cast<int64_t>(n)};
  info.tensors.push_back(d);
  info.slices = slices;
  return gst_op_tensor_info_to_caps(info);
}

GstBuffer *ModelBuffer(const std::vector<float> &raw, GstClockTime pts) {
  GstBuffer *buf = gst_buffer_new_allocate(nullptr, raw.size() * sizeof(float), nullptr);
  gst_buffer_fill(buf, 0, raw.data(), raw.size() * sizeof(float));
  GST_BUFFER_PTS(buf) = pts;
  return buf;
}

// The plan slice (33 × 15 means, then 33 × 15 log-stds): a straight path at lateral offset y,
// x from 4 m to 100 m, at camera height (z = 0).
constexpr size_t kPlan = 990;
std::vector<float> StraightPlan(float y) {
  std::vector<float> raw(kPlan, 0.0f);
  for (int t = 0; t < 33; t++) {
    raw[t * 15 + 0] = 4.0f + 3.0f * t;
    raw[t * 15 + 1] = y;
    raw[t * 15 + 2] = 0.0f;
  }
  return raw;
}

// The blend of the path colour (40, 200, 90) at alpha 0.5 over black.
constexpr Bgr kPathOnBlack{45, 100, 20};

struct Overlay {
  GstHarness *video = nullptr;
  GstHarness *model = nullptr;
  GstBus *bus = nullptr;

  explicit Overlay(bool with_model) {
    video = gst_harness_new_with_padnames("opoverlay", "video", "src");
    bus = gst_bus_new();
    gst_element_set_bus(video->element, bus);
    g_object_set(video->element, "rpy", "0.01,0.03,-0.02", nullptr);
    if (with_model)
      model = gst_harness_new_with_element(video->element, "model", nullptr);
    gst_harness_set_src_caps_str(video, kVideoCaps);
  }
  ~Overlay() {
    if (model)
      gst_harness_teardown(model);
    gst_harness_teardown(video);
    gst_object_unref(bus);
  }
  guint64 Stat(const char *name) {
    guint64 v = 0;
    g_object_get(video->element, name, &v, nullptr);
    return v;
  }
  std::string Error(GstClockTime timeout) {
    GstMessage *m = gst_bus_timed_pop_filtered(bus, timeout, GST_MESSAGE_ERROR);
    if (!m)
      return "";
    GError *err = nullptr;
    gchar *debug = nullptr;
    gst_message_parse_error(m, &err, &debug);
    std::string text = std::string(err->message) + " | " + (debug ? debug : "");
    g_error_free(err);
    g_free(debug);
    gst_message_unref(m);
    return text;
  }
};

void ExpectBgr(const Bgr &got, const Bgr &want, const std::string &what) {
  EXPECT_EQ(got.b, want.b) << what;
  EXPECT_EQ(got.g, want.g) << what;
  EXPECT_EQ(got.r, want.r) << what;
}

TEST(Overlay, StraightPathLandsOnTheProjectedPixels) {
  Overlay o(true);
  gst_harness_set_src_caps(o.model, ModelCaps(kPlan, {{"outputs", "plan", 0, 990}}));
  ASSERT_EQ(gst_harness_push(o.video, BlackFrame(0)), GST_FLOW_OK);
  ASSERT_EQ(gst_harness_push(o.model, ModelBuffer(StraightPlan(1.5f), 0)), GST_FLOW_OK);
  GstBuffer *out = gst_harness_pull(o.video);
  ASSERT_NE(out, nullptr);
  EXPECT_EQ(GST_BUFFER_PTS(out), 0u);
  // The path is 1.8 m wide, centred on y = 1.5, on the road (z = camera height).
  for (double x : {8.0, 15.0, 30.0, 60.0, 90.0}) {
    const std::string at = "x = " + std::to_string(x);
    ExpectBgr(ProjectedPixel(out, x, 1.5, kCameraHeight), kPathOnBlack, "centre, " + at);
    ExpectBgr(ProjectedPixel(out, x, -1.5, kCameraHeight), {0, 0, 0}, "mirror image, " + at);
  }
  // Its edges: 0.1 m inside is painted, 0.1 m outside is not (about 13 px at 20 m).
  for (double side : {-1.0, 1.0}) {
    ExpectBgr(ProjectedPixel(out, 20.0, 1.5 + side * 0.8, kCameraHeight), kPathOnBlack,
              "inside the edge");
    ExpectBgr(ProjectedPixel(out, 20.0, 1.5 + side * 1.0, kCameraHeight), {0, 0, 0},
              "outside the edge");
  }
  // Not beyond 100 m (openpilot's drawing distance) and nothing above the horizon.
  ExpectBgr(ProjectedPixel(out, 20.0, 1.5, -3.0), {0, 0, 0}, "above the road");
  gst_buffer_unref(out);
  EXPECT_EQ(o.Stat("predictions"), 1u);
}

TEST(Overlay, LaneLineOpacityIsItsProbability) {
  Overlay o(true);
  // lane_lines: 4 lines × 33 points × (y, z) means, then the same of log-stds; the probs are
  // 8 logits of which [1::2] are the lines' probabilities (docs/contract.md).
  const size_t lanes = 528, probs = 8;
  std::vector<float> raw(lanes + probs, 0.0f);
  const float ys[4] = {-5.55f, -1.85f, 1.85f, 5.55f};
  for (int l = 0; l < 4; l++)
    for (int i = 0; i < 33; i++) {
      raw[(l * 33 + i) * 2 + 0] = ys[l];
      raw[(l * 33 + i) * 2 + 1] = static_cast<float>(kCameraHeight);
    }
  const float logits[4] = {20.0f, 0.0f, -20.0f, 20.0f};  // probabilities ~1, 0.5, ~0, ~1
  for (int l = 0; l < 4; l++)
    raw[lanes + 2 * l + 1] = logits[l];
  gst_harness_set_src_caps(o.model,
                           ModelCaps(raw.size(), {{"outputs", "lane_lines", 0, 528},
                                                  {"outputs", "lane_lines_prob", 528, 536}}));
  ASSERT_EQ(gst_harness_push(o.video, BlackFrame(0)), GST_FLOW_OK);
  ASSERT_EQ(gst_harness_push(o.model, ModelBuffer(raw, 0)), GST_FLOW_OK);
  GstBuffer *out = gst_harness_pull(o.video);
  ASSERT_NE(out, nullptr);
  for (double x : {30.0, 50.0}) {
    ExpectBgr(ProjectedPixel(out, x, ys[0], kCameraHeight), {255, 255, 255}, "line 0, p = 1");
    ExpectBgr(ProjectedPixel(out, x, ys[1], kCameraHeight), {128, 128, 128}, "line 1, p = 0.5");
    ExpectBgr(ProjectedPixel(out, x, ys[2], kCameraHeight), {0, 0, 0}, "line 2, p = 0");
    ExpectBgr(ProjectedPixel(out, x, 0.0, kCameraHeight), {0, 0, 0}, "between the lines");
  }
  gst_buffer_unref(out);
}

TEST(Overlay, FrameWithoutOutputIsDrawnWithTheLastPrediction) {
  Overlay o(true);
  gst_harness_set_src_caps(o.model, ModelCaps(kPlan, {{"outputs", "plan", 0, 990}}));
  const GstClockTime f = 50 * GST_MSECOND;
  // Frame 0 has no output (the first output is frame 1's): drawn without a prediction.
  ASSERT_EQ(gst_harness_push(o.video, BlackFrame(0)), GST_FLOW_OK);
  ASSERT_EQ(gst_harness_push(o.model, ModelBuffer(StraightPlan(1.5f), f)), GST_FLOW_OK);
  GstBuffer *out = gst_harness_pull(o.video);
  ExpectBgr(ProjectedPixel(out, 20.0, 1.5, kCameraHeight), {0, 0, 0}, "frame 0, none yet");
  gst_buffer_unref(out);
  // Frame 1 pairs with its output.
  ASSERT_EQ(gst_harness_push(o.video, BlackFrame(f)), GST_FLOW_OK);
  out = gst_harness_pull(o.video);
  ExpectBgr(ProjectedPixel(out, 20.0, 1.5, kCameraHeight), kPathOnBlack, "frame 1, its own");
  gst_buffer_unref(out);
  // Frame 2 was skipped by the model (the next output is frame 3's, on the other side).
  ASSERT_EQ(gst_harness_push(o.video, BlackFrame(2 * f)), GST_FLOW_OK);
  ASSERT_EQ(gst_harness_push(o.model, ModelBuffer(StraightPlan(-1.5f), 3 * f)), GST_FLOW_OK);
  out = gst_harness_pull(o.video);
  EXPECT_EQ(GST_BUFFER_PTS(out), 2 * f);
  ExpectBgr(ProjectedPixel(out, 20.0, 1.5, kCameraHeight), kPathOnBlack, "frame 2, held");
  ExpectBgr(ProjectedPixel(out, 20.0, -1.5, kCameraHeight), {0, 0, 0}, "frame 2, not frame 3's");
  gst_buffer_unref(out);
  ASSERT_EQ(gst_harness_push(o.video, BlackFrame(3 * f)), GST_FLOW_OK);
  out = gst_harness_pull(o.video);
  ExpectBgr(ProjectedPixel(out, 20.0, -1.5, kCameraHeight), kPathOnBlack, "frame 3, its own");
  ExpectBgr(ProjectedPixel(out, 20.0, 1.5, kCameraHeight), {0, 0, 0}, "frame 3, not held");
  gst_buffer_unref(out);
  EXPECT_EQ(o.Stat("frames"), 4u);
  EXPECT_EQ(o.Stat("predictions"), 2u);
  EXPECT_EQ(o.Stat("held"), 1u);
  EXPECT_EQ(o.Stat("without-prediction"), 1u);
}

TEST(Overlay, GroundTruthIsDrawnInYellowWithoutAModel) {
  // A minimal ground-truth file (samples/drive/README.md format): straight lines at y = ±2 m.
  char path[] = "/tmp/opoverlay-truth-XXXXXX";
  const int fd = g_mkstemp(path);
  ASSERT_GE(fd, 0);
  std::string xs, line2, line_neg, nulls;
  for (int i = 0; i < 33; i++) {
    const char *sep = i ? "," : "";
    xs += sep + std::to_string(192.0 * (i / 32.0) * (i / 32.0));
    line2 += std::string(sep) + "2.0";
    line_neg += std::string(sep) + "-2.0";
    nulls += std::string(sep) + "null";
  }
  const std::string json = "{\"drive\": {\"camera_height_m\": 1.22, \"x_idxs_m\": [" + xs +
                           "]},\n\"frames\": [{\"frame_id\": 0, \"timestamp_sof_ns\": 0, "
                           "\"lane_lines_y_m\": [[" +
                           line2 + "],[" + nulls + "],[" + nulls + "],[" + nulls +
                           "]], \"road_edges_y_m\": [[" + line_neg + "],[" + nulls +
                           "]], \"lead\": {\"distance_m\": null, \"y_m\": null}}]}\n";
  ASSERT_EQ(write(fd, json.data(), json.size()), static_cast<ssize_t>(json.size()));
  close(fd);

  // The file is read on start, and a harness starts its element: set it before.
  GstElement *e = gst_element_factory_make("opoverlay", nullptr);
  ASSERT_NE(e, nullptr);
  g_object_set(e, "rpy", "0.01,0.03,-0.02", "ground-truth", path, nullptr);
  GstHarness *h = gst_harness_new_with_element(e, "video", "src");
  gst_object_unref(e);
  gst_harness_set_src_caps_str(h, kVideoCaps);
  ASSERT_EQ(gst_harness_push(h, BlackFrame(0)), GST_FLOW_OK);
  GstBuffer *out = gst_harness_pull(h);
  ASSERT_NE(out, nullptr);
  const Bgr yellow{0, 187, 217};  // (255, 220, 0) at alpha 0.85 over black
  for (double x : {10.0, 30.0}) {
    ExpectBgr(ProjectedPixel(out, x, 2.0, kCameraHeight), yellow, "truth lane line");
    ExpectBgr(ProjectedPixel(out, x, -2.0, kCameraHeight), yellow, "truth road edge");
    ExpectBgr(ProjectedPixel(out, x, 0.0, kCameraHeight), {0, 0, 0}, "between");
  }
  gst_buffer_unref(out);
  // A frame the file does not cover is drawn without truth.
  ASSERT_EQ(gst_harness_push(h, BlackFrame(GST_SECOND)), GST_FLOW_OK);
  out = gst_harness_pull(h);
  ExpectBgr(ProjectedPixel(out, 10.0, 2.0, kCameraHeight), {0, 0, 0}, "no truth for t = 1 s");
  gst_buffer_unref(out);
  gst_harness_teardown(h);
  g_unlink(path);
}

TEST(Overlay, MissingGroundTruthFileIsAnErrorNamingIt) {
  GstElement *e = gst_element_factory_make("opoverlay", nullptr);
  ASSERT_NE(e, nullptr);
  GstBus *bus = gst_bus_new();
  gst_element_set_bus(e, bus);
  g_object_set(e, "ground-truth", "/nonexistent/groundtruth.json", nullptr);
  EXPECT_EQ(gst_element_set_state(e, GST_STATE_PAUSED), GST_STATE_CHANGE_FAILURE);
  GstMessage *m = gst_bus_pop_filtered(bus, GST_MESSAGE_ERROR);
  ASSERT_NE(m, nullptr);
  GError *err = nullptr;
  gst_message_parse_error(m, &err, nullptr);
  EXPECT_NE(std::string(err->message).find("/nonexistent/groundtruth.json"), std::string::npos)
      << err->message;
  g_error_free(err);
  gst_message_unref(m);
  gst_element_set_state(e, GST_STATE_NULL);
  gst_object_unref(bus);
  gst_object_unref(e);
}

TEST(Overlay, ModelStreamWithNothingToDrawIsRefused) {
  Overlay o(true);
  gst_harness_set_src_caps(o.model, ModelCaps(12, {{"outputs", "pose", 0, 12}}));
  gst_harness_push(o.video, BlackFrame(0));
  gst_harness_push(o.model, ModelBuffer(std::vector<float>(12, 0.0f), 0));
  const std::string error = o.Error(10 * GST_SECOND);
  EXPECT_NE(error.find("plan"), std::string::npos) << error;
}

TEST(Overlay, MalformedCalibrationIsRefusedAndTheOldOneStays) {
  GstElement *e = gst_element_factory_make("opoverlay", nullptr);
  ASSERT_NE(e, nullptr);
  GstBus *bus = gst_bus_new();
  gst_element_set_bus(e, bus);
  g_object_set(e, "rpy", "0.01,0.03,-0.02", nullptr);
  g_object_set(e, "rpy", "0.01,zero", nullptr);
  gchar *rpy = nullptr;
  g_object_get(e, "rpy", &rpy, nullptr);
  EXPECT_STREQ(rpy, "0.01,0.03,-0.02");
  g_free(rpy);
  GstMessage *m = gst_bus_pop_filtered(bus, GST_MESSAGE_WARNING);
  ASSERT_NE(m, nullptr);
  GError *err = nullptr;
  gst_message_parse_warning(m, &err, nullptr);
  EXPECT_NE(std::string(err->message).find("0.01,zero"), std::string::npos) << err->message;
  g_error_free(err);
  gst_message_unref(m);
  gst_object_unref(bus);
  gst_object_unref(e);
}

}  // namespace

int main(int argc, char **argv) {
  gst_init(&argc, &argv);
  // The element is always built: not finding it is a failure (a plugin that does not load).
  GstElementFactory *factory = gst_element_factory_find("opoverlay");
  if (!factory) {
    std::fprintf(stderr, "opoverlay is not registered (GST_PLUGIN_PATH_1_0 = %s)\n",
                 g_getenv("GST_PLUGIN_PATH_1_0"));
    return 1;
  }
  gst_object_unref(factory);
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
