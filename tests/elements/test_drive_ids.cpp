// Frame ids and drops through whole pipelines, with the combined small model (opvision !
// opmsgsink is the whole model):
//   - the documented raw-file pipelines (filesrc ! rawvideoparse, and filesrc with a frame-sized
//     blocksize) evaluate every frame: byte offsets are never taken for frame ids;
//   - a drive with frames removed publishes what modeld would: the frames it evaluates, the
//     filtered frameDropPerc and valid flags, all written out here from openpilot's rules;
//   - frameAge counts the frames that entered the pipeline while a frame waited.
#include <capnp/serialize.h>
#include <gst/gst.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <functional>
#include <iterator>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <vector>

#include "system_plugins.h"
#include "log.capnp.h"
#include "op/gstop.h"

namespace {

constexpr GstClockTime kFrame = GST_SECOND / 20;

std::string Model(const char *name) {
  const char *root = std::getenv("OP_SOURCE_ROOT");
  return std::string(root ? root : ".") + "/models/" + name;
}

struct Message {
  std::string service;
  std::vector<capnp::word> words;
  // A Reader is valid only while its message reader lives: made on first use, over `words`, and
  // dropped when `words` is copied (a move keeps the buffer, and with it the reader).
  mutable std::shared_ptr<capnp::FlatArrayMessageReader> reader;

  Message() = default;
  Message(const Message &o) : service(o.service), words(o.words) {}
  Message &operator=(const Message &o) {
    service = o.service;
    words = o.words;
    reader.reset();
    return *this;
  }
  Message(Message &&) = default;
  Message &operator=(Message &&) = default;

  op::msg::Event::Reader event() const {
    if (!reader)
      reader =
          std::make_shared<capnp::FlatArrayMessageReader>(kj::arrayPtr(words.data(), words.size()));
    return reader->getRoot<op::msg::Event>();
  }
};

// Collects opmsgsink's "message" signal.
struct Collected {
  std::mutex lock;
  std::vector<Message> messages;
};

void OnMessage(GstElement *, const gchar *service, GBytes *bytes, gpointer data) {
  auto *c = static_cast<Collected *>(data);
  gsize n = 0;
  const void *p = g_bytes_get_data(bytes, &n);
  Message m;
  m.service = service;
  m.words.resize(n / sizeof(capnp::word));
  std::memcpy(m.words.data(), p, m.words.size() * sizeof(capnp::word));
  std::lock_guard<std::mutex> guard(c->lock);
  c->messages.push_back(std::move(m));
}

guint64 Stat(GstElement *e, const char *name) {
  guint64 v = 0;
  g_object_get(e, name, &v, nullptr);
  return v;
}

// Runs a pipeline to EOS; "" or the error.
std::string RunToEos(GstElement *pipeline) {
  if (gst_element_set_state(pipeline, GST_STATE_PLAYING) == GST_STATE_CHANGE_FAILURE)
    return "the pipeline did not start";
  GstBus *bus = gst_element_get_bus(pipeline);
  GstMessage *msg = gst_bus_timed_pop_filtered(bus, 300 * GST_SECOND,
                                               GstMessageType(GST_MESSAGE_EOS | GST_MESSAGE_ERROR));
  std::string error;
  if (!msg) {
    error = "timeout";
  } else if (GST_MESSAGE_TYPE(msg) == GST_MESSAGE_ERROR) {
    GError *err = nullptr;
    gst_message_parse_error(msg, &err, nullptr);
    error = err ? err->message : "error";
    g_clear_error(&err);
  }
  if (msg)
    gst_message_unref(msg);
  gst_object_unref(bus);
  return error;
}

// The small combined network from a road appsrc (tensor caps, format=time) to opmsgsink, with
// the messages collected; stopped and released however the test ends.
struct CombinedPipeline {
  GstElement *pipeline = nullptr, *road = nullptr, *v = nullptr, *s = nullptr;
  Collected c;

  void Start(const std::string &sink_options) {
    const std::string launch =
        "appsrc name=road format=time ! opvision name=v precision=fp32 model=" +
        Model("driving_supercombo_small.onnx") + " ! opmsgsink name=s emit-signals=true" +
        sink_options;
    GError *err = nullptr;
    pipeline = gst_parse_launch(launch.c_str(), &err);
    ASSERT_TRUE(pipeline && !err) << (err ? err->message : "?");
    road = gst_bin_get_by_name(GST_BIN(pipeline), "road");
    v = gst_bin_get_by_name(GST_BIN(pipeline), "v");
    s = gst_bin_get_by_name(GST_BIN(pipeline), "s");
    GstOpTensorInfo info;
    info.tensors.push_back({"img", GstOpTensorType::kUint8, {1, 12, 128, 256}});
    GstCaps *caps = gst_op_tensor_info_to_caps(info);
    g_object_set(road, "caps", caps, nullptr);
    gst_caps_unref(caps);
    g_signal_connect(s, "message", G_CALLBACK(OnMessage), &c);
    ASSERT_NE(gst_element_set_state(pipeline, GST_STATE_PLAYING), GST_STATE_CHANGE_FAILURE);
  }

  ~CombinedPipeline() {
    if (!pipeline)
      return;
    gst_element_set_state(pipeline, GST_STATE_NULL);
    for (GstElement *e : {road, v, s})
      if (e)
        gst_object_unref(e);
    gst_object_unref(pipeline);
  }
};

class DriveIdsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string why;
    if (!LoadSystemPlugins({{"coreelements", "libgstcoreelements.so"},
                            {"rawparse", "libgstrawparse.so"},
                            {"app", "libgstapp.so"}},
                           &why))
      GTEST_SKIP() << why;
  }
};

// The raw-file pipelines of docs/recipes.md and docs/warp.md: every frame evaluated, none
// skipped, three messages per frame with consecutive frame ids from 0.
TEST_F(DriveIdsTest, RawFilePipelinesEvaluateEveryFrame) {
  constexpr int kFrames = 6, kW = 1928, kH = 1208;
  constexpr size_t kBytes = size_t(kW) * kH * 3 / 2;
  const std::string path =
      std::string(g_get_tmp_dir()) + "/op-drive-ids-" + std::to_string(getpid()) + ".nv12";
  {
    std::mt19937 rng(3);
    std::vector<char> frame(kBytes);
    std::ofstream f(path, std::ios::binary);
    for (int t = 0; t < kFrames; t++) {
      for (auto &b : frame)
        b = char(rng());
      f.write(frame.data(), std::streamsize(frame.size()));
    }
  }
  const std::string model = Model("driving_supercombo_small.onnx");
  const std::string tail =
      " ! opwarp rpy=0.012,0.021,-0.016 ! opvision name=v precision=fp32 "
      "model=" +
      model + " ! opmsgsink name=s emit-signals=true";
  const std::string sources[] = {
      // rawvideoparse: byte offsets, no offset_end.
      "filesrc location=" + path +
          " ! rawvideoparse format=nv12 width=1928 height=1208 "
          "framerate=20/1",
      // filesrc alone: byte offsets with offset_end = offset + size, no timestamps.
      "filesrc location=" + path + " blocksize=" + std::to_string(kBytes) +
          " ! video/x-raw,format=NV12,width=1928,height=1208,framerate=20/1",
  };
  for (const std::string &source : sources) {
    SCOPED_TRACE(source);
    GError *err = nullptr;
    GstElement *pipeline = gst_parse_launch((source + tail).c_str(), &err);
    ASSERT_TRUE(pipeline && !err) << (err ? err->message : "?");
    GstElement *v = gst_bin_get_by_name(GST_BIN(pipeline), "v");
    GstElement *s = gst_bin_get_by_name(GST_BIN(pipeline), "s");
    Collected c;
    g_signal_connect(s, "message", G_CALLBACK(OnMessage), &c);
    EXPECT_EQ(RunToEos(pipeline), "");
    EXPECT_EQ(Stat(v, "frames"), guint64(kFrames));
    EXPECT_EQ(Stat(v, "skipped"), 0u);
    std::vector<guint32> ids;
    for (const Message &m : c.messages)
      if (m.service == "modelV2")
        ids.push_back(m.event().getModelV2().getFrameId());
    EXPECT_EQ(ids, (std::vector<guint32>{0, 1, 2, 3, 4, 5}));
    EXPECT_EQ(c.messages.size(), size_t(3 * kFrames));
    gst_element_set_state(pipeline, GST_STATE_NULL);
    gst_object_unref(v);
    gst_object_unref(s);
    gst_object_unref(pipeline);
  }
  std::remove(path.c_str());
}

// What modeld does with these received frame ids, written out from its rules (double).
struct ModeldFrame {
  guint32 id;
  guint32 dropped;
  bool published;
  double perc;
};

std::vector<ModeldFrame> Modeld(const std::vector<guint32> &ids) {
  std::vector<ModeldFrame> out;
  const double k = (0.05 / 10.0) / (0.05 / 10.0 + 1.0);
  double x = 0;
  int64_t last = 0;
  for (size_t i = 0; i < ids.size(); i++) {
    const int64_t d = std::max<int64_t>(0, int64_t(ids[i]) - last - 1);
    x = x + k * (double(std::min<int64_t>(d, 10)) - x);
    if (i < 10)
      x = 0;
    out.push_back({ids[i], guint32(d), d == 0, 100.0 * x / (1.0 + x)});
    last = ids[i];
  }
  return out;
}

// Camera tensors with the meta a camera's warp attaches: ids from 3 (a live camera), frames
// removed in bursts, the calibration seen from id 30 on.
TEST_F(DriveIdsTest, DriveWithFramesRemovedPublishesWhatModeldWould) {
  std::vector<guint32> ids;
  for (guint32 id = 3; id < 140; id++) {
    const bool removed = id == 12 || (id >= 50 && id < 63) || id == 80 || id == 81 || id == 120;
    if (!removed)
      ids.push_back(id);
  }
  constexpr guint32 kCalibratedFrom = 30;
  const std::vector<ModeldFrame> want = Modeld(ids);

  CombinedPipeline p;
  ASSERT_NO_FATAL_FAILURE(p.Start(""));
  GstElement *pipeline = p.pipeline, *road = p.road, *v = p.v;
  Collected &c = p.c;

  std::mt19937 rng(11);
  std::vector<uint8_t> bytes(12 * 128 * 256);
  for (guint32 id : ids) {
    for (auto &b : bytes)
      b = uint8_t(rng());
    GstBuffer *b = gst_buffer_new_memdup(bytes.data(), bytes.size());
    GST_BUFFER_PTS(b) = id * kFrame;
    GST_BUFFER_DURATION(b) = kFrame;
    GstOpFrameMeta *m = gst_buffer_add_op_frame_meta(b);
    m->road_frame_id = id;
    m->road_sof_ns = GST_SECOND + id * kFrame;
    m->road_eof_ns = m->road_sof_ns + 20 * GST_MSECOND;
    m->calibration_seen = id >= kCalibratedFrom;
    GstFlowReturn ret = GST_FLOW_OK;
    g_signal_emit_by_name(road, "push-buffer", b, &ret);
    gst_buffer_unref(b);
    ASSERT_EQ(ret, GST_FLOW_OK) << "frame " << id;
  }
  GstFlowReturn ret = GST_FLOW_OK;
  g_signal_emit_by_name(road, "end-of-stream", &ret);
  GstBus *bus = gst_element_get_bus(pipeline);
  GstMessage *msg = gst_bus_timed_pop_filtered(bus, 300 * GST_SECOND,
                                               GstMessageType(GST_MESSAGE_EOS | GST_MESSAGE_ERROR));
  ASSERT_TRUE(msg) << "timeout";
  EXPECT_EQ(GST_MESSAGE_TYPE(msg), GST_MESSAGE_EOS);
  gst_message_unref(msg);
  gst_object_unref(bus);

  std::vector<ModeldFrame> published;
  for (const ModeldFrame &f : want)
    if (f.published)
      published.push_back(f);
  // Skipped: the first frame (id 3: two frames "dropped" before it) and the one after each of
  // the four gaps (13, 63, 82, 121).
  EXPECT_EQ(Stat(v, "skipped"), guint64(want.size() - published.size()));
  EXPECT_EQ(want.size() - published.size(), 5u);
  EXPECT_EQ(Stat(v, "frames"), guint64(published.size()));

  std::vector<const Message *> v2, odometry;
  for (const Message &m : c.messages) {
    if (m.service == "modelV2")
      v2.push_back(&m);
    else if (m.service == "cameraOdometry")
      odometry.push_back(&m);
  }
  ASSERT_EQ(v2.size(), published.size());
  ASSERT_EQ(odometry.size(), published.size());
  double last_perc = 0;
  for (size_t i = 0; i < published.size(); i++) {
    const ModeldFrame &f = published[i];
    SCOPED_TRACE("frame " + std::to_string(f.id));
    auto e = v2[i]->event();
    EXPECT_EQ(e.getModelV2().getFrameId(), f.id);
    EXPECT_NEAR(e.getModelV2().getFrameDropPerc(), f.perc, 1e-4);
    EXPECT_EQ(e.getValid(), f.id >= kCalibratedFrom);
    auto o = odometry[i]->event();
    EXPECT_EQ(o.getCameraOdometry().getFrameId(), f.id);
    // openpilot: calibration seen and no frame dropped just before.
    EXPECT_EQ(o.getValid(), f.id >= kCalibratedFrom && f.dropped == 0);
    last_perc = f.perc;
  }
  // The bursts leave a visible percentage (known value from the filter above).
  EXPECT_GT(last_perc, 1.0);
}

// frameAge as openpilot fills it: the newest road frame id that has entered the pipeline (opwarp)
// when a frame's messages are filled, minus the frame's id. NV12 frames without a meta (opwarp
// numbers them 0, 1, ...) go through opwarp, a queue, the combined network and opmsgsink.
// Handed through one at a time (each message awaited before the next frame), every frameAge is
// 0. Then the sink is held at its pad while four more frames enter: the held frame and the ones
// queued behind it are filled after all four have passed opwarp, so their ages are the newest
// id pushed (6) minus their own: 3, 2, 1, 0.
TEST_F(DriveIdsTest, FrameAgeCountsTheFramesThatArrivedWhileAFrameWaited) {
  constexpr int kW = 1344, kH = 760;  // mici: the presets follow the frame size
  const std::string launch =
      "appsrc name=road format=time caps=video/x-raw,format=NV12,width=1344,height=760,"
      "framerate=20/1 ! opwarp name=w rpy=0,0,0 ! queue max-size-buffers=16 max-size-bytes=0 "
      "max-size-time=0 ! opvision name=v precision=fp32 model=" +
      Model("driving_supercombo_small.onnx") +
      " ! opmsgsink name=s emit-signals=true services=modelV2";
  GError *err = nullptr;
  GstElement *pipeline = gst_parse_launch(launch.c_str(), &err);
  ASSERT_TRUE(pipeline && !err) << (err ? err->message : "?");
  GstElement *road = gst_bin_get_by_name(GST_BIN(pipeline), "road");
  GstElement *w = gst_bin_get_by_name(GST_BIN(pipeline), "w");
  GstElement *s = gst_bin_get_by_name(GST_BIN(pipeline), "s");
  Collected c;
  g_signal_connect(s, "message", G_CALLBACK(OnMessage), &c);

  // Frames that have left opwarp (their ids noted), and a gate on the sink's pad.
  struct Gate {
    std::mutex lock;
    std::condition_variable cv;
    bool open = true;
    std::atomic<int> warped{0};
  } gate;
  GstPad *warp_src = gst_element_get_static_pad(w, "src");
  gst_pad_add_probe(
      warp_src, GST_PAD_PROBE_TYPE_BUFFER,
      [](GstPad *, GstPadProbeInfo *, gpointer g) {
        static_cast<Gate *>(g)->warped++;
        return GST_PAD_PROBE_OK;
      },
      &gate, nullptr);
  gst_object_unref(warp_src);
  GstPad *sink_pad = gst_element_get_static_pad(s, "sink");
  gst_pad_add_probe(
      sink_pad, GST_PAD_PROBE_TYPE_BUFFER,
      [](GstPad *, GstPadProbeInfo *, gpointer g) {
        auto *gt = static_cast<Gate *>(g);
        std::unique_lock<std::mutex> hold(gt->lock);
        gt->cv.wait(hold, [gt] { return gt->open; });
        return GST_PAD_PROBE_OK;
      },
      &gate, nullptr);
  gst_object_unref(sink_pad);
  auto set_gate = [&](bool open) {
    std::lock_guard<std::mutex> guard(gate.lock);
    gate.open = open;
    gate.cv.notify_all();
  };
  // However the test ends, nothing stays held.
  struct Opener {
    std::function<void()> f;
    ~Opener() { f(); }
  } opener{[&] { set_gate(true); }};

  ASSERT_NE(gst_element_set_state(pipeline, GST_STATE_PLAYING), GST_STATE_CHANGE_FAILURE);
  std::mt19937 rng(17);
  std::vector<uint8_t> bytes(size_t(kW) * kH * 3 / 2);
  int pushed = 0;
  auto push = [&] {
    for (auto &b : bytes)
      b = uint8_t(rng());
    GstBuffer *b = gst_buffer_new_memdup(bytes.data(), bytes.size());
    GST_BUFFER_PTS(b) = pushed * kFrame;
    GST_BUFFER_DURATION(b) = kFrame;
    GstFlowReturn ret = GST_FLOW_OK;
    g_signal_emit_by_name(road, "push-buffer", b, &ret);
    gst_buffer_unref(b);
    pushed++;
    return ret;
  };
  auto wait_until = [](const std::function<bool()> &done) {
    for (int tries = 0; tries < 24000 && !done(); tries++)
      g_usleep(5000);
    return done();
  };
  auto messages = [&] {
    std::lock_guard<std::mutex> guard(c.lock);
    return c.messages.size();
  };

  for (int k = 0; k < 3; k++) {
    ASSERT_EQ(push(), GST_FLOW_OK);
    ASSERT_TRUE(wait_until([&] { return messages() == size_t(k + 1); })) << "frame " << k;
  }
  set_gate(false);
  for (int k = 0; k < 4; k++)
    ASSERT_EQ(push(), GST_FLOW_OK);
  EXPECT_TRUE(wait_until([&] { return gate.warped == pushed; }))
      << gate.warped << " of " << pushed << " frames warped";
  set_gate(true);
  ASSERT_TRUE(wait_until([&] { return messages() == size_t(pushed); })) << messages();

  std::vector<guint32> ids, ages;
  for (const Message &m : c.messages) {
    ids.push_back(m.event().getModelV2().getFrameId());
    ages.push_back(m.event().getModelV2().getFrameAge());
  }
  EXPECT_EQ(ids, (std::vector<guint32>{0, 1, 2, 3, 4, 5, 6}));
  EXPECT_EQ(ages, (std::vector<guint32>{0, 0, 0, 3, 2, 1, 0}));

  GstFlowReturn ret = GST_FLOW_OK;
  g_signal_emit_by_name(road, "end-of-stream", &ret);
  gst_element_set_state(pipeline, GST_STATE_NULL);
  for (GstElement *e : {road, w, s})
    gst_object_unref(e);
  gst_object_unref(pipeline);
}

// modelExecutionTime is this frame's own device time: frames go in one at a time, and each
// frame's device time is recovered independently from opvision's running mean (`device-time`,
// its timer's completion callbacks): n·mean_n − (n−1)·mean_(n−1). The first frame counts too
// (no earlier frame has finished when it is submitted).
TEST_F(DriveIdsTest, ModelExecutionTimeIsTheFramesOwnDeviceTime) {
  CombinedPipeline p;
  ASSERT_NO_FATAL_FAILURE(p.Start(" timestamps=stream services=modelV2"));
  GstElement *road = p.road, *v = p.v;
  Collected &c = p.c;

  auto mean_ms = [&] {
    double ms = 0;
    g_object_get(v, "device-time", &ms, nullptr);
    return ms;
  };
  std::mt19937 rng(5);
  std::vector<uint8_t> bytes(12 * 128 * 256);
  double previous_mean = 0;
  int measured = 0;
  for (guint32 id = 0; id < 6; id++) {
    for (auto &b : bytes)
      b = uint8_t(rng());
    GstBuffer *b = gst_buffer_new_memdup(bytes.data(), bytes.size());
    GST_BUFFER_PTS(b) = id * kFrame;
    GstOpFrameMeta *m = gst_buffer_add_op_frame_meta(b);
    m->road_frame_id = id;
    m->calibration_seen = TRUE;
    GstFlowReturn ret = GST_FLOW_OK;
    g_signal_emit_by_name(road, "push-buffer", b, &ret);
    gst_buffer_unref(b);
    ASSERT_EQ(ret, GST_FLOW_OK);
    // The frame's message, then its completion callback in opvision's timer.
    double mean = previous_mean;
    for (int tries = 0; tries < 2000; tries++) {
      size_t n = 0;
      {
        std::lock_guard<std::mutex> guard(c.lock);
        n = c.messages.size();
      }
      mean = mean_ms();
      if (n == id + 1 && mean != previous_mean)
        break;
      g_usleep(5000);
    }
    ASSERT_EQ(c.messages.size(), size_t(id + 1)) << "frame " << id;
    const double own_ms = mean * (id + 1) - previous_mean * id;
    previous_mean = mean;
    const double got_ms = 1e3 * c.messages[id].event().getModelV2().getModelExecutionTime();
    if (own_ms <= 0)
      continue;  // the queue does not profile: nothing to compare with
    measured++;
    EXPECT_NEAR(got_ms, own_ms, 0.1 * own_ms) << "frame " << id;
  }
  if (measured == 0)
    GTEST_SKIP() << "the OpenCL queue has no profiling: device times are not measured";

  GstFlowReturn ret = GST_FLOW_OK;
  g_signal_emit_by_name(road, "end-of-stream", &ret);
}

// Byte-identical replays: the same frames through the combined network twice with
// `timestamps=stream deterministic=true` give identical log files, with modelExecutionTime 0;
// the default still records the measured device time.
TEST_F(DriveIdsTest, DeterministicStreamRunsWriteTheSameBytes) {
  const std::string base =
      std::string(g_get_tmp_dir()) + "/op-drive-ids-" + std::to_string(getpid()) + "-";
  auto run = [&](const std::string &options, const std::string &log, Collected *out) {
    CombinedPipeline p;
    ASSERT_NO_FATAL_FAILURE(p.Start(" timestamps=stream location=" + log + options));
    std::mt19937 rng(9);
    std::vector<uint8_t> bytes(12 * 128 * 256);
    for (guint32 id = 0; id < 4; id++) {
      for (auto &b : bytes)
        b = uint8_t(rng());
      GstBuffer *b = gst_buffer_new_memdup(bytes.data(), bytes.size());
      GST_BUFFER_PTS(b) = id * kFrame;
      GstOpFrameMeta *m = gst_buffer_add_op_frame_meta(b);
      m->road_frame_id = id;
      m->road_eof_ns = GST_SECOND + id * kFrame;
      m->calibration_seen = TRUE;
      GstFlowReturn ret = GST_FLOW_OK;
      g_signal_emit_by_name(p.road, "push-buffer", b, &ret);
      gst_buffer_unref(b);
      ASSERT_EQ(ret, GST_FLOW_OK);
    }
    GstFlowReturn ret = GST_FLOW_OK;
    g_signal_emit_by_name(p.road, "end-of-stream", &ret);
    GstBus *bus = gst_element_get_bus(p.pipeline);
    GstMessage *msg = gst_bus_timed_pop_filtered(
        bus, 300 * GST_SECOND, GstMessageType(GST_MESSAGE_EOS | GST_MESSAGE_ERROR));
    ASSERT_TRUE(msg) << "timeout";
    EXPECT_EQ(GST_MESSAGE_TYPE(msg), GST_MESSAGE_EOS);
    gst_message_unref(msg);
    gst_object_unref(bus);
    std::lock_guard<std::mutex> guard(p.c.lock);
    out->messages = p.c.messages;
  };
  auto read = [](const std::string &path) {
    std::ifstream f(path, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
  };
  Collected first, second, measured;
  ASSERT_NO_FATAL_FAILURE(run(" deterministic=true", base + "a.rlog.zst", &first));
  ASSERT_NO_FATAL_FAILURE(run(" deterministic=true", base + "b.rlog.zst", &second));
  ASSERT_NO_FATAL_FAILURE(run("", base + "c.rlog.zst", &measured));
  const std::string a = read(base + "a.rlog.zst"), b = read(base + "b.rlog.zst");
  ASSERT_EQ(first.messages.size(), 12u);
  EXPECT_FALSE(a.empty());
  EXPECT_TRUE(a == b) << "two deterministic runs wrote different logs (" << a.size() << " and "
                      << b.size() << " bytes)";
  ASSERT_EQ(measured.messages.size(), 12u);
  for (size_t i = 0; i < 12; i += 3) {
    EXPECT_EQ(first.messages[i].event().getModelV2().getModelExecutionTime(), 0.0f);
    EXPECT_EQ(first.messages[i].event().getLogMonoTime(), (i / 3) * kFrame);
    // Without deterministic: the measured time (device time, or the stage's host time).
    EXPECT_GT(measured.messages[i].event().getModelV2().getModelExecutionTime(), 0.0f) << i;
  }
  for (const char *name : {"a", "b", "c"})
    std::remove((base + name + ".rlog.zst").c_str());
}

}  // namespace
