// opvision on the machine's OpenCL device (PoCL in CI), with the small reference models:
// pairing of jittered and lagging wide streams, single camera, frame-id gaps, EOS, models that
// do not fit, the combined network against onnxruntime and numpy queues (opnet_reference.py), a
// model swap while PLAYING, QoS, latency, and a per-frame path that neither allocates nor waits.
// oppolicy's cases are in test_oppolicy.cpp.
#include "network_pipeline.h"

namespace {

class OpVisionTest : public OpNetworkTest {};

// Pushes everything, ends both streams, and collects every output until EOS.
std::vector<GstBuffer *> PushAllAndDrain(Pipeline &pl, const std::vector<GstBuffer *> &road,
                                         const std::vector<GstBuffer *> &wide) {
  for (GstBuffer *b : road)
    Pipeline::Push(pl.road, b);
  for (GstBuffer *b : wide)
    Pipeline::Push(pl.wide, b);
  Pipeline::EndOfStream(pl.road);
  if (pl.wide)
    Pipeline::EndOfStream(pl.wide);
  std::vector<GstBuffer *> out;
  while (GstBuffer *b = pl.Pull())
    out.push_back(b);
  return out;
}

std::string VisionOnly(bool two_cameras, const std::string &props = "") {
  return Sources(two_cameras) + "opvision name=v precision=fp32 " + props +
         " model=" + Model("driving_vision_small.onnx") + " ! " + kSink;
}

// Wide capture times jitter around the road ones: every road frame pairs with its own wide
// frame, and exactly the pairs more than 10 ms apart are counted as out of sync.
TEST_F(OpVisionTest, JitteredWideStreamPairsEveryFrameAndCountsTheSkew) {
  Pipeline pl(VisionOnly(true));
  ASSERT_TRUE(pl.road && pl.wide && pl.vision && pl.sink);
  ASSERT_TRUE(pl.Play());
  const int64_t jitter_ms[] = {0, 6, -8, 12, -15, 3, 10, -11, 24, -24};
  std::vector<GstBuffer *> road, wide;
  auto bytes = RandomCamera(7);
  for (int k = 0; k < 10; k++) {
    road.push_back(CameraBuffer(bytes, k * kFrame, k, false));
    GstBuffer *w = CameraBuffer(bytes, k * kFrame, 100 + k, true);
    gst_buffer_get_op_frame_meta(w)->wide_sof_ns += jitter_ms[k] * GST_MSECOND;
    wide.push_back(w);
  }
  auto out = PushAllAndDrain(pl, road, wide);
  ASSERT_EQ(out.size(), 10u) << pl.Message(GST_MESSAGE_ERROR);
  for (int k = 0; k < 10; k++) {
    GstOpFrameMeta *m = gst_buffer_get_op_frame_meta(out[k]);
    ASSERT_TRUE(m);
    EXPECT_EQ(m->road_frame_id, guint32(k));
    EXPECT_EQ(m->wide_frame_id, guint32(100 + k)) << "road frame " << k;
    gst_buffer_unref(out[k]);
  }
  // |jitter| > 10 ms: 12, -15, -11, 24, -24 (10 is not above the limit).
  EXPECT_EQ(pl.Stat(pl.vision, "out-of-sync"), 5u);
  EXPECT_EQ(pl.Stat(pl.vision, "dropped-wide"), 0u);
  EXPECT_EQ(pl.Stat(pl.vision, "dropped-road"), 0u);
  EXPECT_NE(pl.Message(GST_MESSAGE_WARNING).find("out of sync"), std::string::npos);
}

// The wide camera runs 30 ms behind. As openpilot's receive loop: road frame 0 pairs with wide
// frame 0 (30 ms apart: run, counted out of sync), road frame 1 is less than 25 ms after that
// wide frame and is passed over, so road frame 2 follows a drop and is only warped; every later
// road frame k pairs with wide frame k − 1, 20 ms older.
TEST_F(OpVisionTest, LaggingWideStreamPassesOverARoadFrame) {
  Pipeline pl(VisionOnly(true));
  ASSERT_TRUE(pl.road && pl.wide);
  ASSERT_TRUE(pl.Play());
  std::vector<GstBuffer *> road, wide;
  auto bytes = RandomCamera(8);
  for (int k = 0; k < 8; k++) {
    road.push_back(CameraBuffer(bytes, k * kFrame, k, false));
    GstBuffer *w = CameraBuffer(bytes, k * kFrame, 100 + k, true);
    gst_buffer_get_op_frame_meta(w)->wide_sof_ns += 30 * GST_MSECOND;
    wide.push_back(w);
  }
  auto out = PushAllAndDrain(pl, road, wide);
  ASSERT_EQ(out.size(), 6u) << pl.Message(GST_MESSAGE_ERROR);
  const std::pair<guint32, guint32> want[] = {{0, 100}, {3, 102}, {4, 103},
                                              {5, 104}, {6, 105}, {7, 106}};
  for (size_t i = 0; i < out.size(); i++) {
    GstOpFrameMeta *m = gst_buffer_get_op_frame_meta(out[i]);
    EXPECT_EQ(m->road_frame_id, want[i].first);
    EXPECT_EQ(m->wide_frame_id, want[i].second);
    gst_buffer_unref(out[i]);
  }
  EXPECT_EQ(pl.Stat(pl.vision, "dropped-road"), 1u);
  EXPECT_EQ(pl.Stat(pl.vision, "skipped"), 1u);
  EXPECT_EQ(pl.Stat(pl.vision, "out-of-sync"), 7u);  // every pair run or warped is 20–30 ms apart
}

// A wide camera at twice the rate: the wide frames between road frames are too old and dropped.
TEST_F(OpVisionTest, OlderWideBuffersAreDropped) {
  Pipeline pl(VisionOnly(true));
  ASSERT_TRUE(pl.road && pl.wide);
  ASSERT_TRUE(pl.Play());
  std::vector<GstBuffer *> road, wide;
  auto bytes = RandomCamera(9);
  for (int k = 0; k < 5; k++)
    road.push_back(CameraBuffer(bytes, k * kFrame, k, false));
  for (int j = 0; j < 10; j++)  // every 25 ms, starting 26 ms before the first road frame
    wide.push_back(CameraBuffer(bytes, j * kFrame / 2, 100 + j, true));
  for (int j = 0; j < 10; j++)
    gst_buffer_get_op_frame_meta(wide[j])->wide_sof_ns -= 26 * GST_MSECOND;
  auto out = PushAllAndDrain(pl, road, wide);
  // Road k (at 50k ms) pairs with wide 2k + 1 (at 50k − 1 ms); wide 2k (at 50k − 26 ms) is
  // more than 25 ms older and dropped.
  ASSERT_EQ(out.size(), 5u) << pl.Message(GST_MESSAGE_ERROR);
  for (int k = 0; k < 5; k++) {
    EXPECT_EQ(gst_buffer_get_op_frame_meta(out[k])->wide_frame_id, guint32(100 + 2 * k + 1));
    gst_buffer_unref(out[k]);
  }
  EXPECT_EQ(pl.Stat(pl.vision, "dropped-wide"), 5u);
  EXPECT_EQ(pl.Stat(pl.vision, "out-of-sync"), 0u);
}

// Road frame ids 0 1 2 4 5: frame 4 follows a drop and is not evaluated (openpilot warps it
// but runs no network); with skip-after-drop=false it is.
TEST_F(OpVisionTest, FrameAfterAGapIsSkipped) {
  for (bool skip : {true, false}) {
    Pipeline pl(VisionOnly(false, skip ? "" : "skip-after-drop=false"));
    ASSERT_TRUE(pl.road && pl.vision);
    ASSERT_TRUE(pl.Play());
    std::vector<GstBuffer *> road;
    auto bytes = RandomCamera(10);
    for (int id : {0, 1, 2, 4, 5})
      road.push_back(CameraBuffer(bytes, id * kFrame, id, false));
    auto out = PushAllAndDrain(pl, road, {});
    std::vector<guint32> ids;
    for (GstBuffer *b : out) {
      ids.push_back(gst_buffer_get_op_frame_meta(b)->road_frame_id);
      gst_buffer_unref(b);
    }
    if (skip) {
      EXPECT_EQ(ids, (std::vector<guint32>{0, 1, 2, 5}));
      EXPECT_EQ(pl.Stat(pl.vision, "skipped"), 1u);
    } else {
      EXPECT_EQ(ids, (std::vector<guint32>{0, 1, 2, 4, 5}));
      EXPECT_EQ(pl.Stat(pl.vision, "skipped"), 0u);
    }
  }
}

// The wide stream ends mid-stream: the road frames go on alone (with a warning), and the end of
// the road stream ends the output: no deadlock either way.
TEST_F(OpVisionTest, WideStreamEndingMidStreamDoesNotStallTheRoadOne) {
  Pipeline pl(VisionOnly(true));
  ASSERT_TRUE(pl.road && pl.wide);
  ASSERT_TRUE(pl.Play());
  auto bytes = RandomCamera(11);
  for (int k = 0; k < 3; k++) {
    Pipeline::Push(pl.road, CameraBuffer(bytes, k * kFrame, k, false));
    Pipeline::Push(pl.wide, CameraBuffer(bytes, k * kFrame, 100 + k, true));
  }
  Pipeline::EndOfStream(pl.wide);
  for (int k = 3; k < 6; k++)
    Pipeline::Push(pl.road, CameraBuffer(bytes, k * kFrame, k, false));
  Pipeline::EndOfStream(pl.road);
  std::vector<guint32> wide_ids;
  while (GstBuffer *b = pl.Pull()) {
    wide_ids.push_back(gst_buffer_get_op_frame_meta(b)->wide_frame_id);
    gst_buffer_unref(b);
  }
  // Paired while the wide stream lasted, then the road frame serves as both.
  EXPECT_EQ(wide_ids, (std::vector<guint32>{100, 101, 102, 3, 4, 5}));
  gboolean eos = FALSE;
  g_object_get(pl.sink, "eos", &eos, nullptr);
  EXPECT_TRUE(eos);
  EXPECT_NE(pl.Message(GST_MESSAGE_WARNING).find("wide camera stream ended"), std::string::npos);
}

// The camera tensors do not have the model's input shape: the error names the input, what the
// model wants and what the caps carry, before any frame is evaluated.
TEST_F(OpVisionTest, ModelThatDoesNotFitTheCapsFailsNamingTheInput) {
  Pipeline pl(VisionOnly(false), /*road_height=*/64);
  ASSERT_TRUE(pl.road && pl.vision);
  ASSERT_TRUE(pl.Play());
  std::vector<uint8_t> small(kCameraBytes / 2, 7);
  Pipeline::Push(pl.road, CameraBuffer(small, 0, 0, false));
  GstBuffer *out = pl.Pull(10 * GST_SECOND);
  EXPECT_FALSE(out);
  if (out)
    gst_buffer_unref(out);
  const std::string error = pl.Message(GST_MESSAGE_ERROR);
  EXPECT_NE(error.find("model input \"img\" wants uint8 (1,12,128,256)"), std::string::npos)
      << error;
  EXPECT_NE(error.find("(1,12,64,256)"), std::string::npos) << error;
  EXPECT_EQ(pl.Stat(pl.vision, "frames"), 0u);
}

// A missing model is a RESOURCE error naming the file, at start.
TEST_F(OpVisionTest, MissingModelIsAnErrorNamingTheFile) {
  Pipeline pl(Sources(false) + "opvision name=v model=/nonexistent/vision.onnx ! " + kSink);
  ASSERT_TRUE(pl.vision);
  EXPECT_EQ(gst_element_set_state(pl.get(), GST_STATE_PAUSED), GST_STATE_CHANGE_FAILURE);
  const std::string error = pl.Message(GST_MESSAGE_ERROR);
  EXPECT_NE(error.find("/nonexistent/vision.onnx"), std::string::npos) << error;
}

// precision=int8 with a float model is an error naming the model and saying to quantize it
// first, at start: never a float run under the int8 name.
TEST_F(OpVisionTest, Int8WithAFloatModelIsAnErrorNamingTheModel) {
  const std::string model = Model("driving_vision_small.onnx");
  Pipeline pl(Sources(false) + "opvision name=v precision=int8 model=" + model + " ! " + kSink);
  ASSERT_TRUE(pl.vision);
  EXPECT_EQ(gst_element_set_state(pl.get(), GST_STATE_PAUSED), GST_STATE_CHANGE_FAILURE);
  const std::string error = pl.Message(GST_MESSAGE_ERROR);
  EXPECT_NE(error.find(model + " is a float model with no quantization"), std::string::npos)
      << error;
  EXPECT_NE(error.find("opc quantize " + model + " --calibration DIR"), std::string::npos) << error;
  EXPECT_EQ(pl.Stat(pl.vision, "frames"), 0u);
}

// The combined network alone: opvision owns the queues; the desire changes while PLAYING by
// property and by event; the reference runs the same network with the same queue history.
TEST_F(OpVisionTest, CombinedNetworkMatchesOnnxruntimeWithTheQueues) {
  Pipeline pl(Sources(true) + "opvision name=v precision=fp32 model=" +
              Model("driving_supercombo_small.onnx") + " ! " + kSink);
  ASSERT_TRUE(pl.road && pl.wide && pl.vision);
  ASSERT_TRUE(pl.Play());
  const int desires[] = {0, 4, 4, 4, 0, 4, 2, 2, 0, 6, 5, 5};
  for (int k = 0; k < 28; k++) {
    const int desire = desires[k % G_N_ELEMENTS(desires)];
    const int traffic = k >= 14 ? 1 : 0;
    if (k % 2)
      g_object_set(pl.vision, "desire", desire, "traffic-convention", traffic, nullptr);
    else
      gst_element_send_event(pl.road, SettingsEvent(desire, traffic));
    auto road = RandomCamera(700 + k), wide = RandomCamera(900 + k);
    Pipeline::Push(pl.road, CameraBuffer(road, k * kFrame, k, false));
    Pipeline::Push(pl.wide, CameraBuffer(wide, k * kFrame, k, true));
    GstBuffer *out = pl.Pull();
    ASSERT_TRUE(out) << "frame " << k << ": " << pl.Message(GST_MESSAGE_ERROR);
    ASSERT_EQ(gst_buffer_n_memory(out), 1u);
    Record(k, road, wide, desire, traffic, out);
    gst_buffer_unref(out);
  }
  CheckAgainstReference("combined", Model("driving_supercombo_small.onnx"));
}

// Setting `model` while PLAYING: a file that does not load leaves the old network running with
// a warning; a loadable one replaces it at a frame boundary and the caps follow its outputs.
TEST_F(OpVisionTest, ModelSwapWhilePlaying) {
  Pipeline pl(VisionOnly(true));
  ASSERT_TRUE(pl.road && pl.wide && pl.vision);
  ASSERT_TRUE(pl.Play());
  auto frame = [&](int k, std::vector<uint8_t> *road, std::vector<uint8_t> *wide) {
    *road = RandomCamera(1100 + k);
    *wide = RandomCamera(1300 + k);
    Pipeline::Push(pl.road, CameraBuffer(*road, k * kFrame, k, false));
    Pipeline::Push(pl.wide, CameraBuffer(*wide, k * kFrame, k, true));
    return pl.Pull();
  };
  std::vector<uint8_t> road, wide;
  int k = 0;
  for (; k < 2; k++) {
    GstBuffer *out = frame(k, &road, &wide);
    ASSERT_TRUE(out);
    EXPECT_EQ(gst_buffer_get_size(out), 1600u * 4);
    gst_buffer_unref(out);
  }
  g_object_set(pl.vision, "model", "/nonexistent/other.onnx", nullptr);
  // The failed load is reported at the next frame boundary after it finished.
  std::string warning;
  for (int tries = 0; tries < 50 && warning.find("other.onnx") == std::string::npos; tries++, k++) {
    GstBuffer *out = frame(k, &road, &wide);
    ASSERT_TRUE(out) << pl.Message(GST_MESSAGE_ERROR);
    EXPECT_EQ(gst_buffer_get_size(out), 1600u * 4) << "the old model must keep running";
    gst_buffer_unref(out);
    warning += pl.Message(GST_MESSAGE_WARNING);
    if (warning.find("other.onnx") == std::string::npos)
      g_usleep(50000);
  }
  EXPECT_NE(warning.find("/nonexistent/other.onnx"), std::string::npos) << warning;

  g_object_set(pl.vision, "model", Model("driving_supercombo_small.onnx").c_str(), nullptr);
  int swapped_at = -1;
  for (int tries = 0; tries < 200 && swapped_at < 0; tries++, k++) {
    GstBuffer *out = frame(k, &road, &wide);
    ASSERT_TRUE(out) << pl.Message(GST_MESSAGE_ERROR);
    const gsize size = gst_buffer_get_size(out);
    ASSERT_TRUE(size == 1600u * 4 || size == 2598u * 4) << size;
    if (size == 2598u * 4) {
      swapped_at = k;
      Record(0, road, wide, 0, 0, out);  // the combined network's first frame: fresh queues
    }
    gst_buffer_unref(out);
    if (swapped_at < 0)
      g_usleep(50000);
  }
  ASSERT_GE(swapped_at, 0) << "the new model never took over";
  GstPad *src = gst_element_get_static_pad(pl.vision, "src");
  GstCaps *caps = gst_pad_get_current_caps(src);
  auto info = gst_op_tensor_info_from_caps(caps);
  ASSERT_TRUE(info.ok());
  EXPECT_EQ(info->tensors[0].dims, (std::vector<int64_t>{1, 2598}));
  EXPECT_TRUE(info->FindSlice("plan")) << "the caps carry the new model's slices";
  gst_caps_unref(caps);
  gst_object_unref(src);
  for (int n = 1; n < 5; n++, k++) {
    GstBuffer *out = frame(k, &road, &wide);
    ASSERT_TRUE(out);
    Record(n, road, wide, 0, 0, out);
    gst_buffer_unref(out);
  }
  CheckAgainstReference("combined", Model("driving_supercombo_small.onnx"));
}

}  // namespace

// ---- the per-frame path: no device allocation, no compilation, no host wait ---------------
//
// The test executable exports these OpenCL entry points (export_dynamic), so the plugin's calls
// resolve to them first; each counts the call when it comes from a thread other than the test's
// own (the test's thread maps outputs, which legitimately waits) and forwards to the real one.

#include <dlfcn.h>

#include <atomic>
#include <thread>

namespace {

std::atomic<int> g_allocs{0}, g_builds{0}, g_waits{0};
std::atomic<bool> g_counting{false};
std::thread::id g_test_thread;

bool Counted() {
  return g_counting.load() && std::this_thread::get_id() != g_test_thread;
}

template <typename F>
F Real(const char *name) {
  static_assert(sizeof(F) == sizeof(void *));
  void *p = dlsym(RTLD_NEXT, name);
  F f;
  memcpy(&f, &p, sizeof(p));
  return f;
}

}  // namespace

extern "C" {

CL_API_ENTRY cl_mem CL_API_CALL clCreateBuffer(cl_context c, cl_mem_flags f, size_t n, void *h,
                                               cl_int *e) {
  static auto real = Real<decltype(&clCreateBuffer)>("clCreateBuffer");
  if (Counted())
    g_allocs++;
  return real(c, f, n, h, e);
}

CL_API_ENTRY cl_program CL_API_CALL clCreateProgramWithSource(cl_context c, cl_uint n,
                                                              const char **s, const size_t *l,
                                                              cl_int *e) {
  static auto real = Real<decltype(&clCreateProgramWithSource)>("clCreateProgramWithSource");
  if (Counted())
    g_builds++;
  return real(c, n, s, l, e);
}

CL_API_ENTRY cl_kernel CL_API_CALL clCreateKernel(cl_program p, const char *name, cl_int *e) {
  static auto real = Real<decltype(&clCreateKernel)>("clCreateKernel");
  if (Counted())
    g_builds++;
  return real(p, name, e);
}

CL_API_ENTRY cl_int CL_API_CALL clWaitForEvents(cl_uint n, const cl_event *l) {
  static auto real = Real<decltype(&clWaitForEvents)>("clWaitForEvents");
  if (Counted())
    g_waits++;
  return real(n, l);
}

CL_API_ENTRY cl_int CL_API_CALL clFinish(cl_command_queue q) {
  static auto real = Real<decltype(&clFinish)>("clFinish");
  if (Counted())
    g_waits++;
  return real(q);
}

CL_API_ENTRY void *CL_API_CALL clEnqueueMapBuffer(cl_command_queue q, cl_mem m, cl_bool blocking,
                                                  cl_map_flags f, size_t o, size_t n, cl_uint w,
                                                  const cl_event *l, cl_event *ev, cl_int *e) {
  static auto real = Real<decltype(&clEnqueueMapBuffer)>("clEnqueueMapBuffer");
  if (Counted() && blocking)
    g_waits++;
  return real(q, m, blocking, f, o, n, w, l, ev, e);
}

CL_API_ENTRY cl_int CL_API_CALL clEnqueueReadBuffer(cl_command_queue q, cl_mem m, cl_bool blocking,
                                                    size_t o, size_t n, void *p, cl_uint w,
                                                    const cl_event *l, cl_event *ev) {
  static auto real = Real<decltype(&clEnqueueReadBuffer)>("clEnqueueReadBuffer");
  if (Counted() && blocking)
    g_waits++;
  return real(q, m, blocking, o, n, p, w, l, ev);
}

CL_API_ENTRY cl_int CL_API_CALL clEnqueueWriteBuffer(cl_command_queue q, cl_mem m, cl_bool blocking,
                                                     size_t o, size_t n, const void *p, cl_uint w,
                                                     const cl_event *l, cl_event *ev) {
  static auto real = Real<decltype(&clEnqueueWriteBuffer)>("clEnqueueWriteBuffer");
  if (Counted() && blocking)
    g_waits++;
  return real(q, m, blocking, o, n, p, w, l, ev);
}

}  // extern "C"

namespace {

// After a few frames of warm-up (pools filled, staging buffers made), frames go through both
// elements, and through the combined network, without a device allocation, a program or kernel
// creation, or a host wait on their streaming threads.
TEST_F(OpVisionTest, SteadyStateAllocatesNothingAndNeverWaits) {
  g_test_thread = std::this_thread::get_id();
  for (const char *mode : {"split", "combined"}) {
    const bool split = std::string(mode) == "split";
    Pipeline pl(
        Sources(true) + "opvision name=v precision=fp32 model=" +
        Model(split ? "driving_vision_small.onnx" : "driving_supercombo_small.onnx") +
        (split ? " ! oppolicy name=p precision=fp32 model=" + Model("driving_policy_small.onnx")
               : std::string()) +
        " ! " + kSink);
    ASSERT_TRUE(pl.road && pl.wide && pl.vision);
    ASSERT_TRUE(pl.Play());
    auto bytes = RandomCamera(77);
    g_allocs = g_builds = g_waits = 0;
    g_counting = true;
    int warmup_allocs = 0;
    for (int k = 0; k < 12; k++) {
      if (k == 4) {
        // Warm-up made the output pools and the upload buffers on the streaming thread: seeing
        // them proves the wrappers are interposed on the plugin's calls.
        warmup_allocs = g_allocs.exchange(0);
        g_builds = g_waits = 0;
      }
      if (k == 6)  // a desire change is a property write, not device work
        g_object_set(split ? pl.policy : pl.vision, "desire", 3, nullptr);
      Pipeline::Push(pl.road, CameraBuffer(bytes, k * kFrame, k, false));
      Pipeline::Push(pl.wide, CameraBuffer(bytes, k * kFrame, k, true));
      GstBuffer *out = pl.Pull();
      ASSERT_TRUE(out) << pl.Message(GST_MESSAGE_ERROR);
      gst_buffer_unref(out);
    }
    g_counting = false;
    EXPECT_GE(warmup_allocs, 1) << mode << ": the counting wrappers are not interposed";
    EXPECT_EQ(g_allocs.load(), 0) << mode;
    EXPECT_EQ(g_builds.load(), 0) << mode;
    EXPECT_EQ(g_waits.load(), 0) << mode;
  }
}

}  // namespace

namespace {

// A QoS event saying downstream is a second late: frames that cannot make it are dropped before
// any device work, and frames after the earliest time run again.
TEST_F(OpVisionTest, QosDropsLateFramesBeforeRunningThem) {
  Pipeline pl(VisionOnly(false));
  ASSERT_TRUE(pl.road && pl.vision);
  ASSERT_TRUE(pl.Play());
  auto bytes = RandomCamera(12);
  Pipeline::Push(pl.road, CameraBuffer(bytes, 0, -1, false));
  GstBuffer *out = pl.Pull();
  ASSERT_TRUE(out) << pl.Message(GST_MESSAGE_ERROR);
  gst_buffer_unref(out);
  GstPad *src = gst_element_get_static_pad(pl.vision, "src");
  ASSERT_TRUE(gst_pad_send_event(
      src, gst_event_new_qos(GST_QOS_TYPE_UNDERFLOW, 1.0, GST_SECOND, 0)));  // earliest: 2 s
  gst_object_unref(src);
  for (int k = 1; k <= 3; k++)
    Pipeline::Push(pl.road, CameraBuffer(bytes, k * kFrame, -1, false));
  Pipeline::Push(pl.road, CameraBuffer(bytes, 3 * GST_SECOND, -1, false));
  Pipeline::EndOfStream(pl.road);
  std::vector<GstClockTime> pts;
  while (GstBuffer *b = pl.Pull()) {
    pts.push_back(GST_BUFFER_PTS(b));
    gst_buffer_unref(b);
  }
  EXPECT_EQ(pts, (std::vector<GstClockTime>{3 * GST_SECOND}));
  EXPECT_EQ(pl.Stat(pl.vision, "qos-dropped"), 3u);
  EXPECT_EQ(pl.Stat(pl.vision, "frames"), 2u);
}

// A latency query through both elements includes what they measured per frame.
TEST_F(OpVisionTest, LatencyQueryAddsTheMeasuredTime) {
  Pipeline pl(Sources(false) +
              "opvision name=v precision=fp32 model=" + Model("driving_vision_small.onnx") +
              " ! oppolicy name=p precision=fp32 model=" + Model("driving_policy_small.onnx") +
              " ! " + kSink);
  ASSERT_TRUE(pl.road && pl.vision && pl.policy);
  ASSERT_TRUE(pl.Play());
  auto bytes = RandomCamera(13);
  for (int k = 0; k < 4; k++) {
    Pipeline::Push(pl.road, CameraBuffer(bytes, k * kFrame, k, false));
    GstBuffer *out = pl.Pull();
    ASSERT_TRUE(out);
    gst_buffer_unref(out);
  }
  // The times come from completion callbacks, which may run a moment after the output arrived.
  gdouble vision_ms = 0, policy_ms = 0;
  for (int tries = 0; tries < 100 && (vision_ms <= 0 || policy_ms <= 0); tries++) {
    g_object_get(pl.vision, "max-time", &vision_ms, nullptr);
    g_object_get(pl.policy, "max-time", &policy_ms, nullptr);
    if (vision_ms <= 0 || policy_ms <= 0)
      g_usleep(50000);
  }
  ASSERT_GT(vision_ms, 0.0);
  ASSERT_GT(policy_ms, 0.0);
  GstPad *sinkpad = gst_element_get_static_pad(pl.sink, "sink");
  GstQuery *q = gst_query_new_latency();
  ASSERT_TRUE(gst_pad_peer_query(sinkpad, q));
  GstClockTime min = 0, max = 0;
  gboolean live = FALSE;
  gst_query_parse_latency(q, &live, &min, &max);
  gst_query_unref(q);
  gst_object_unref(sinkpad);
  // Measured times only grow, so what the query saw is at least what was read before it.
  EXPECT_GE(min, GstClockTime((vision_ms + policy_ms) * GST_MSECOND) - 2) << min;
}

}  // namespace
