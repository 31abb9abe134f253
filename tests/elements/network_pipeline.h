// What the opvision and oppolicy tests share: the GStreamer setup with the plugin and the
// system's appsrc/appsink, camera tensors with the provenance meta, a pipeline driven one frame
// at a time, and a fixture that checks recorded frames against opnet_reference.py (onnxruntime
// and numpy queues). Included by one test file each, so it defines its helpers in place.
#pragma once

#include <gst/gst.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "op/gstop.h"
#include "system_plugins.h"

namespace {

constexpr size_t kCameraBytes = 12 * 128 * 256;
constexpr GstClockTime kFrame = GST_SECOND / 20;

// appsrc and appsink come from the system's gst-plugins-base (a required dependency, so missing
// it is a failure).
inline void InitGst() {
  static bool done = false;
  if (done)
    return;
  std::string why;
  ASSERT_TRUE(
      LoadSystemPlugins({{"app", "libgstapp.so"}, {"coreelements", "libgstcoreelements.so"}}, &why))
      << why;
  done = true;
}

inline std::string Model(const char *name) {
  const char *root = std::getenv("OP_SOURCE_ROOT");
  return std::string(root ? root : ".") + "/models/" + name;
}

inline GstCaps *CameraCaps(const char *name, int height = 128) {
  GstOpTensorInfo info;
  info.tensors.push_back({name, GstOpTensorType::kUint8, {1, 12, height, 256}});
  return gst_op_tensor_info_to_caps(info);
}

inline std::vector<uint8_t> RandomCamera(uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<uint8_t> v(kCameraBytes);
  for (auto &b : v)
    b = uint8_t(rng());
  return v;
}

// A camera tensor with the provenance meta a warp would attach (`id` < 0: no meta).
inline GstBuffer *CameraBuffer(const std::vector<uint8_t> &bytes, GstClockTime pts, int64_t id,
                               bool wide) {
  GstBuffer *b = gst_buffer_new_memdup(bytes.data(), bytes.size());
  GST_BUFFER_PTS(b) = pts;
  GST_BUFFER_DURATION(b) = kFrame;
  if (id >= 0) {
    GstOpFrameMeta *m = gst_buffer_add_op_frame_meta(b);
    if (wide) {
      m->wide_frame_id = guint32(id);
      m->wide_sof_ns = pts + GST_SECOND;  // capture clock differs from PTS on purpose
    } else {
      m->road_frame_id = guint32(id);
      m->road_sof_ns = pts + GST_SECOND;
    }
  }
  return b;
}

// The "op-driving-settings" event as an application writes it (see plugins/common/gstopevents.h).
inline GstEvent *SettingsEvent(int desire, int traffic) {
  return gst_event_new_custom(
      GST_EVENT_CUSTOM_BOTH, gst_structure_new("op-driving-settings", "desire", G_TYPE_INT, desire,
                                               "traffic-convention", G_TYPE_INT, traffic, nullptr));
}

inline std::vector<float> Floats(GstBuffer *b, guint memory) {
  GstMemory *m = gst_buffer_peek_memory(b, memory);
  GstMapInfo map;
  EXPECT_TRUE(gst_memory_map(m, &map, GST_MAP_READ));  // waits for the device
  std::vector<float> v(map.size / sizeof(float));
  memcpy(v.data(), map.data, v.size() * sizeof(float));
  gst_memory_unmap(m, &map);
  return v;
}

inline void WriteFile(const std::string &path, const void *data, size_t bytes) {
  std::ofstream f(path, std::ios::binary);
  f.write(static_cast<const char *>(data), std::streamsize(bytes));
}

// appsrc (road, optional wide) → … → appsink, driven one frame at a time from the test thread.
class Pipeline {
 public:
  explicit Pipeline(const std::string &description, int road_height = 128) {
    GError *err = nullptr;
    pipeline_ = gst_parse_launch(description.c_str(), &err);
    EXPECT_TRUE(pipeline_ && !err) << (err ? err->message : "?") << "\n" << description;
    if (err)
      g_error_free(err);
    road = gst_bin_get_by_name(GST_BIN(pipeline_), "road");
    wide = gst_bin_get_by_name(GST_BIN(pipeline_), "wide");
    vision = gst_bin_get_by_name(GST_BIN(pipeline_), "v");
    policy = gst_bin_get_by_name(GST_BIN(pipeline_), "p");
    sink = gst_bin_get_by_name(GST_BIN(pipeline_), "out");
    // Caps are set as objects: tensor caps hold quoted lists that gst-launch quoting mangles.
    SetCaps(road, CameraCaps("img", road_height));
    SetCaps(wide, CameraCaps("big_img"));
  }
  static void SetCaps(GstElement *src, GstCaps *caps) {
    if (src)
      g_object_set(src, "caps", caps, nullptr);
    gst_caps_unref(caps);
  }
  ~Pipeline() {
    gst_element_set_state(pipeline_, GST_STATE_NULL);
    for (GstElement *e : {road, wide, vision, policy, sink})
      if (e)
        gst_object_unref(e);
    gst_object_unref(pipeline_);
  }
  GstElement *get() { return pipeline_; }

  bool Play() {
    return gst_element_set_state(pipeline_, GST_STATE_PLAYING) != GST_STATE_CHANGE_FAILURE;
  }
  static void Push(GstElement *src, GstBuffer *b) {
    GstFlowReturn ret = GST_FLOW_OK;
    g_signal_emit_by_name(src, "push-buffer", b, &ret);
    gst_buffer_unref(b);
  }
  static void EndOfStream(GstElement *src) {
    GstFlowReturn ret = GST_FLOW_OK;
    g_signal_emit_by_name(src, "end-of-stream", &ret);
  }
  // The next output buffer, or null after `timeout` (EOS, error, or nothing produced).
  GstBuffer *Pull(GstClockTime timeout = 120 * GST_SECOND) {
    GstSample *s = nullptr;
    g_signal_emit_by_name(sink, "try-pull-sample", timeout, &s);
    if (!s)
      return nullptr;
    GstBuffer *b = gst_buffer_ref(gst_sample_get_buffer(s));
    gst_sample_unref(s);
    return b;
  }
  // Every error (or warning) message on the bus so far, one per line ("" when none).
  std::string Message(GstMessageType type) {
    GstBus *bus = gst_element_get_bus(pipeline_);
    std::string text;
    while (GstMessage *m = gst_bus_pop_filtered(bus, type)) {
      GError *err = nullptr;
      gchar *debug = nullptr;
      if (type == GST_MESSAGE_ERROR)
        gst_message_parse_error(m, &err, &debug);
      else
        gst_message_parse_warning(m, &err, &debug);
      text += std::string(err->message) + " | " + (debug ? debug : "") + "\n";
      g_error_free(err);
      g_free(debug);
      gst_message_unref(m);
    }
    gst_object_unref(bus);
    return text;
  }
  guint64 Stat(GstElement *e, const char *name) {
    guint64 v = 0;
    g_object_get(e, name, &v, nullptr);
    return v;
  }

  GstElement *road = nullptr, *wide = nullptr, *vision = nullptr, *policy = nullptr,
             *sink = nullptr;

 private:
  GstElement *pipeline_ = nullptr;
};

inline std::string Sources(bool with_wide) {
  std::string s = "appsrc name=road format=time ! v.img ";
  if (with_wide)
    s += "appsrc name=wide format=time ! v.big_img ";
  return s;
}

constexpr const char *kSink = "appsink name=out sync=false max-buffers=100";

class OpNetworkTest : public ::testing::Test {
 public:
  void SetUp() override {
    InitGst();
    if (HasFatalFailure())
      return;
    GstElementFactory *f = gst_element_factory_find("opvision");
    ASSERT_TRUE(f) << "the opvision element is not registered (GST_PLUGIN_PATH_1_0?)";
    gst_object_unref(f);
    dir = std::filesystem::temp_directory_path() /
          ("opvision-" + std::to_string(getpid()) + "-" +
           ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::create_directories(dir);
  }
  void TearDown() override { std::filesystem::remove_all(dir); }

  // Runs opnet_reference.py over what was recorded in `folder`: its exit status, *out its output.
  static int RunReference(const std::filesystem::path &folder, const std::string &mode,
                          const std::string &first, const std::string &second, std::string *out) {
    std::string cmd = std::string(OP_VENV_PYTHON) + " " + OP_REFERENCE_SCRIPT + " " +
                      folder.string() + " " + mode + " " + first + " " + second + " 2>&1";
    FILE *p = popen(cmd.c_str(), "r");
    if (!p)
      return -1;
    char line[512];
    while (fgets(line, sizeof(line), p))
      *out += line;
    return pclose(p);
  }

  // Runs opnet_reference.py over what the test recorded in `dir`.
  void CheckAgainstReference(const std::string &mode, const std::string &first,
                             const std::string &second = "") {
    std::string out;
    EXPECT_EQ(RunReference(dir, mode, first, second, &out), 0) << out;
    std::printf("reference: %s", out.c_str());
  }

  // Records one evaluated frame for the reference.
  void Record(int k, const std::vector<uint8_t> &road, const std::vector<uint8_t> &wide, int desire,
              int traffic, GstBuffer *out) {
    WriteFile(dir / ("road_" + std::to_string(k) + ".bin"), road.data(), road.size());
    WriteFile(dir / ("wide_" + std::to_string(k) + ".bin"), wide.data(), wide.size());
    for (guint i = 0; i < gst_buffer_n_memory(out); i++) {
      std::vector<float> v = Floats(out, i);
      WriteFile(dir / ("out_" + std::to_string(k) + "_" + std::to_string(i) + ".bin"), v.data(),
                v.size() * sizeof(float));
    }
    std::ofstream(dir / "frames.txt", std::ios::app)
        << k << " " << desire << " " << traffic << "\n";
  }

  std::filesystem::path dir;
};

}  // namespace
