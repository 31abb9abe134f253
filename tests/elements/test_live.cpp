// Live pipelines keep at most two frames on the device: camera frames through opwarp → opvision
// (the small combined model) → queue → opmsgsink, fed faster than the device runs the network.
//   - live (appsrc is-live=true): opwarp drops frames before their upload, counts them (`dropped`
//     and one QoS message each), and at every frame's submission at most one earlier frame is
//     still unfinished on the device, checked from the device's own profiling timestamps (warp
//     queued, network ended); the frame-id gaps reach modelV2.frameDropPerc exactly as modeld's
//     rules (written out here) give them for the frames opwarp let through;
//   - not live: the same frames, pushed all at once, are all warped and evaluated, none dropped.
// tools/bench/live_latency.sh runs the live test with other figures: OP_LIVE_MODEL (a combined
// model, default the small one), OP_LIVE_FRAMES (default 60) and OP_LIVE_PERIOD_MS (the feed
// period; default half the network's device time, measured first in a short non-live run).
// The queue before opmsgsink matters: opmsgsink waits for each frame's output on the host, and
// without a queue that wait would hold back the source instead of the device filling up.
#include <capnp/serialize.h>
#include <gst/gst.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <functional>
#include <mutex>
#include <random>
#include <string>
#include <vector>

#include "system_plugins.h"
#include "log.capnp.h"
#include "op/gstop.h"

namespace {

constexpr int kWidth = 1928, kHeight = 1208;
constexpr size_t kFrameBytes = size_t(kWidth) * kHeight * 3 / 2;

std::string Model(const char *name) {
  if (const char *model = std::getenv("OP_LIVE_MODEL"))
    return model;
  const char *root = std::getenv("OP_SOURCE_ROOT");
  return std::string(root ? root : ".") + "/models/" + name;
}

double EnvNumber(const char *name, double fallback) {
  const char *v = std::getenv(name);
  return v && *v ? std::atof(v) : fallback;
}

guint64 Stat(GstElement *e, const char *name) {
  guint64 v = 0;
  g_object_get(e, name, &v, nullptr);
  return v;
}

// One frame as it reached opmsgsink: its id and the device commands that bound it (retained).
struct Done {
  guint32 id = 0;
  cl_event warp_first = nullptr, warp_last = nullptr, net_first = nullptr, net_last = nullptr;
};

// Everything the pipeline's threads record.
struct Record {
  std::mutex lock;
  std::vector<guint32> warped;                  // ids opwarp pushed
  std::vector<Done> done;                       // frames at opmsgsink
  std::vector<std::pair<guint32, float>> perc;  // modelV2 frameId, frameDropPerc
  guint64 qos = 0, qos_processed = 0, qos_dropped = 0;
  ~Record() {
    for (Done &d : done)
      for (cl_event e : {d.warp_first, d.warp_last, d.net_first, d.net_last})
        if (e)
          clReleaseEvent(e);
  }
};

GstPadProbeReturn OnWarped(GstPad *, GstPadProbeInfo *info, gpointer data) {
  auto *r = static_cast<Record *>(data);
  if (GstOpFrameMeta *m = gst_buffer_get_op_frame_meta(GST_PAD_PROBE_INFO_BUFFER(info))) {
    std::lock_guard<std::mutex> guard(r->lock);
    r->warped.push_back(m->road_frame_id);
  }
  return GST_PAD_PROBE_OK;
}

GstPadProbeReturn OnDone(GstPad *, GstPadProbeInfo *info, gpointer data) {
  auto *r = static_cast<Record *>(data);
  GstOpFrameMeta *m = gst_buffer_get_op_frame_meta(GST_PAD_PROBE_INFO_BUFFER(info));
  if (!m)
    return GST_PAD_PROBE_OK;
  Done d;
  d.id = m->road_frame_id;
  d.warp_first = m->stage_first[GST_OP_STAGE_WARP];
  d.warp_last = m->stage_last[GST_OP_STAGE_WARP];
  d.net_first = m->stage_first[GST_OP_STAGE_POLICY];  // the combined model's stage
  d.net_last = m->stage_last[GST_OP_STAGE_POLICY];
  for (cl_event e : {d.warp_first, d.warp_last, d.net_first, d.net_last})
    if (e)
      clRetainEvent(e);
  std::lock_guard<std::mutex> guard(r->lock);
  r->done.push_back(d);
  return GST_PAD_PROBE_OK;
}

void OnMessage(GstElement *, const gchar *service, GBytes *bytes, gpointer data) {
  auto *r = static_cast<Record *>(data);
  if (std::strcmp(service, "modelV2") != 0)
    return;
  gsize n = 0;
  const void *p = g_bytes_get_data(bytes, &n);
  std::vector<capnp::word> words(n / sizeof(capnp::word));
  std::memcpy(words.data(), p, words.size() * sizeof(capnp::word));
  capnp::FlatArrayMessageReader reader(kj::arrayPtr(words.data(), words.size()));
  auto v2 = reader.getRoot<op::msg::Event>().getModelV2();
  std::lock_guard<std::mutex> guard(r->lock);
  r->perc.emplace_back(v2.getFrameId(), v2.getFrameDropPerc());
}

GstBusSyncReply OnBus(GstBus *, GstMessage *msg, gpointer data) {
  if (GST_MESSAGE_TYPE(msg) == GST_MESSAGE_QOS) {
    auto *r = static_cast<Record *>(data);
    GstFormat format;
    guint64 processed = 0, dropped = 0;
    gst_message_parse_qos_stats(msg, &format, &processed, &dropped);
    std::lock_guard<std::mutex> guard(r->lock);
    r->qos++;
    r->qos_processed = processed;
    r->qos_dropped = dropped;
  }
  return GST_BUS_PASS;
}

// What modeld does with the frame ids it receives (docs/contract.md), written out in double.
struct ModeldFrame {
  guint32 id;
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
    out.push_back({ids[i], d == 0, 100.0 * x / (1.0 + x)});
    last = ids[i];
  }
  return out;
}

cl_ulong Profile(cl_event e, cl_profiling_info what) {
  cl_ulong t = 0;
  if (!e || clGetEventProfilingInfo(e, what, sizeof(t), &t, nullptr) != CL_SUCCESS)
    return 0;
  return t;
}

class LiveTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string why;
    if (!LoadSystemPlugins({{"coreelements", "libgstcoreelements.so"}, {"app", "libgstapp.so"}},
                           &why))
      GTEST_SKIP() << why;
    frame_.resize(kFrameBytes);
    std::mt19937 rng(7);
    for (auto &b : frame_)
      b = uint8_t(rng());
  }

  // Runs `frames` frames, `period_us` apart (0: all at once), through the pipeline, or fewer
  // once `enough` says so; the ids are the buffer offsets (offset_end = offset + 1, as cameras
  // set them).
  void Run(bool live, int frames, gulong period_us, Record *r,
           const std::function<bool()> &enough = nullptr) {
    const std::string caps = "video/x-raw,format=NV12,width=" + std::to_string(kWidth) +
                             ",height=" + std::to_string(kHeight) + ",framerate=20/1";
    const std::string line = std::string("appsrc name=src format=time is-live=") +
                             (live ? "true min-latency=0 max-latency=100000000" : "false") +
                             " caps=" + caps +
                             " ! opwarp name=w rpy=0.01,0.02,-0.01 ! opvision name=v "
                             "precision=fp32 model=" +
                             Model("driving_supercombo_small.onnx") +
                             " ! queue ! opmsgsink name=s sync=false emit-signals=true";
    GError *err = nullptr;
    pipeline_ = gst_parse_launch(line.c_str(), &err);
    ASSERT_TRUE(pipeline_ && !err) << (err ? err->message : "?");
    src_ = gst_bin_get_by_name(GST_BIN(pipeline_), "src");
    w_ = gst_bin_get_by_name(GST_BIN(pipeline_), "w");
    v_ = gst_bin_get_by_name(GST_BIN(pipeline_), "v");
    s_ = gst_bin_get_by_name(GST_BIN(pipeline_), "s");
    GstPad *wsrc = gst_element_get_static_pad(w_, "src");
    gst_pad_add_probe(wsrc, GST_PAD_PROBE_TYPE_BUFFER, OnWarped, r, nullptr);
    gst_object_unref(wsrc);
    GstPad *ssink = gst_element_get_static_pad(s_, "sink");
    gst_pad_add_probe(ssink, GST_PAD_PROBE_TYPE_BUFFER, OnDone, r, nullptr);
    gst_object_unref(ssink);
    g_signal_connect(s_, "message", G_CALLBACK(OnMessage), r);
    GstBus *bus = gst_element_get_bus(pipeline_);
    gst_bus_set_sync_handler(bus, OnBus, r, nullptr);
    gst_object_unref(bus);
    ASSERT_NE(gst_element_set_state(pipeline_, GST_STATE_PLAYING), GST_STATE_CHANGE_FAILURE);

    const gint64 t0 = g_get_monotonic_time();
    for (int k = 0; k < frames && !(enough && enough()); k++) {
      if (period_us) {
        const gint64 due = t0 + gint64(k) * gint64(period_us);
        const gint64 now = g_get_monotonic_time();
        if (due > now)
          g_usleep(gulong(due - now));
      }
      // One frame's bytes, shared read-only by every buffer.
      GstBuffer *b = gst_buffer_new_wrapped_full(GST_MEMORY_FLAG_READONLY, frame_.data(),
                                                 frame_.size(), 0, frame_.size(), nullptr, nullptr);
      GST_BUFFER_PTS(b) = GstClockTime(k) * (period_us ? period_us : 1000) * GST_USECOND;
      GST_BUFFER_DURATION(b) = (period_us ? period_us : 1000) * GST_USECOND;
      GST_BUFFER_OFFSET(b) = guint64(k);
      GST_BUFFER_OFFSET_END(b) = guint64(k) + 1;
      GstFlowReturn ret = GST_FLOW_OK;
      g_signal_emit_by_name(src_, "push-buffer", b, &ret);
      gst_buffer_unref(b);
      ASSERT_EQ(ret, GST_FLOW_OK) << "frame " << k;
      pushed_ = k + 1;
    }
    GstFlowReturn ret = GST_FLOW_OK;
    g_signal_emit_by_name(src_, "end-of-stream", &ret);
    GstBus *b = gst_element_get_bus(pipeline_);
    GstMessage *msg = gst_bus_timed_pop_filtered(
        b, 300 * GST_SECOND, GstMessageType(GST_MESSAGE_EOS | GST_MESSAGE_ERROR));
    gst_object_unref(b);
    ASSERT_TRUE(msg) << "timeout";
    std::string error;
    if (GST_MESSAGE_TYPE(msg) == GST_MESSAGE_ERROR) {
      GError *e = nullptr;
      gst_message_parse_error(msg, &e, nullptr);
      error = e ? e->message : "error";
      g_clear_error(&e);
    }
    gst_message_unref(msg);
    ASSERT_EQ(error, "");
  }

  void TearDown() override {
    if (pipeline_)
      gst_element_set_state(pipeline_, GST_STATE_NULL);
    for (GstElement *e : {src_, w_, v_, s_})
      if (e)
        gst_object_unref(e);
    if (pipeline_)
      gst_object_unref(pipeline_);
  }

  std::vector<uint8_t> frame_;
  int pushed_ = 0;  // frames the last Run pushed
  GstElement *pipeline_ = nullptr, *src_ = nullptr, *w_ = nullptr, *v_ = nullptr, *s_ = nullptr;
};

TEST_F(LiveTest, NotLiveEveryFrameIsWarpedAndEvaluated) {
  constexpr int kFrames = 12;
  Record r;
  ASSERT_NO_FATAL_FAILURE(Run(false, kFrames, 0, &r));
  EXPECT_EQ(Stat(w_, "dropped"), 0u);
  EXPECT_EQ(Stat(w_, "frames"), guint64(kFrames));
  EXPECT_EQ(Stat(v_, "frames"), guint64(kFrames));
  EXPECT_EQ(Stat(v_, "skipped"), 0u);
  EXPECT_EQ(r.qos, 0u);
  ASSERT_EQ(r.perc.size(), size_t(kFrames));
  for (int k = 0; k < kFrames; k++) {
    EXPECT_EQ(r.perc[k].first, guint32(k));
    EXPECT_EQ(r.perc[k].second, 0.0f);
  }
}

TEST_F(LiveTest, LiveFramesBeyondTwoOnTheDeviceAreDroppedAndCounted) {
  // The network's own device time from a short non-live run; the live run feeds frames at half
  // of it, twice as fast as the device runs the network, until frames were dropped and the
  // drops after modeld's first ten frames show in a published frameDropPerc (at least
  // OP_LIVE_FRAMES frames, at most ten times as many: machines and their load differ).
  double device_ms = 0;
  gulong period_us = gulong(EnvNumber("OP_LIVE_PERIOD_MS", 0) * 1000);
  {
    Record warm;
    ASSERT_NO_FATAL_FAILURE(Run(false, 4, 0, &warm));
    g_object_get(v_, "device-time", &device_ms, nullptr);
    TearDown();
    pipeline_ = src_ = w_ = v_ = s_ = nullptr;
    if (device_ms <= 0)
      GTEST_SKIP() << "the OpenCL queue has no profiling: device times are not measured";
    if (!period_us)
      period_us = gulong(std::max(2000.0, device_ms * 1000.0 / 2.0));
  }
  // Where the live run starts in a debug log (tools/bench/live_latency.sh reads the latency
  // tracer's records after it).
  GST_DEBUG_CATEGORY_STATIC(live_test);
  GST_DEBUG_CATEGORY_INIT(live_test, "oplivetest", 0, "element-live");
  GST_CAT_ERROR(live_test, "live run starts");
  const int kFrames = int(EnvNumber("OP_LIVE_FRAMES", 60));
  Record r;
  auto enough = [&] {
    if (pushed_ < kFrames)
      return false;
    std::lock_guard<std::mutex> guard(r.lock);
    const bool shown = std::any_of(r.perc.begin(), r.perc.end(),
                                   [](const std::pair<guint32, float> &p) { return p.second > 0; });
    return shown && Stat(w_, "dropped") > 0;
  };
  ASSERT_NO_FATAL_FAILURE(Run(true, 10 * kFrames, period_us, &r, enough));
  const int frames = pushed_;
  g_object_get(v_, "device-time", &device_ms, nullptr);
  std::printf("%d frames, network device time (mean) %.2f ms, a frame every %.2f ms\n", frames,
              device_ms, period_us / 1000.0);

  // Every frame is either warped or dropped and counted, each drop with a QoS message.
  const guint64 warped = Stat(w_, "frames"), dropped = Stat(w_, "dropped");
  EXPECT_GT(dropped, 0u);
  EXPECT_EQ(warped + dropped, guint64(frames));
  EXPECT_EQ(r.warped.size(), warped);
  EXPECT_EQ(r.qos, dropped);
  EXPECT_EQ(r.qos_dropped, dropped);

  // At each frame's submission (its warp queued) at most one earlier frame has not ended on the
  // device; submission to completion stays within two frames' device time.
  ASSERT_FALSE(r.done.empty());
  std::vector<double> latency_ms, own_ms, warp_ms;
  int most_in_flight = 0;
  // How much longer than the one unfinished frame in front of it a frame waited before its
  // network started (warp, upload and host time): the bound is "at most one frame waiting".
  double most_extra_wait_ms = 0;
  for (size_t k = 0; k < r.done.size(); k++) {
    const cl_ulong queued = Profile(r.done[k].warp_first, CL_PROFILING_COMMAND_QUEUED);
    const cl_ulong end = Profile(r.done[k].net_last, CL_PROFILING_COMMAND_END);
    ASSERT_TRUE(queued && end) << "frame " << r.done[k].id << " has no profiling times";
    int in_flight = 1;
    cl_ulong front_end = queued;  // when the frames in front of it ended on the device
    for (size_t j = 0; j < k; j++) {
      const cl_ulong end_j = Profile(r.done[j].net_last, CL_PROFILING_COMMAND_END);
      if (end_j > queued) {
        in_flight++;
        front_end = std::max(front_end, end_j);
      }
    }
    const cl_ulong net_start = Profile(r.done[k].net_first, CL_PROFILING_COMMAND_START);
    if (net_start > front_end)
      most_extra_wait_ms = std::max(most_extra_wait_ms, (net_start - front_end) / 1e6);
    most_in_flight = std::max(most_in_flight, in_flight);
    EXPECT_LE(in_flight, 2) << "frame " << r.done[k].id;
    latency_ms.push_back((end - queued) / 1e6);
    if (std::getenv("OP_LIVE_DETAIL"))
      std::printf("frame %u: warp start +%.1f, net start +%.1f, net end +%.1f ms, in flight %d\n",
                  r.done[k].id,
                  (Profile(r.done[k].warp_first, CL_PROFILING_COMMAND_START) - queued) / 1e6,
                  (Profile(r.done[k].net_first, CL_PROFILING_COMMAND_START) - queued) / 1e6,
                  (end - queued) / 1e6, in_flight);
    own_ms.push_back((end - Profile(r.done[k].net_first, CL_PROFILING_COMMAND_START)) / 1e6);
    // The frame's own warp (first warp command's start to last one's end; its upload comes
    // before it and is not included).
    const cl_ulong warp_start = Profile(r.done[k].warp_first, CL_PROFILING_COMMAND_START);
    const cl_ulong warp_end = Profile(r.done[k].warp_last, CL_PROFILING_COMMAND_END);
    if (warp_start && warp_end >= warp_start)
      warp_ms.push_back((warp_end - warp_start) / 1e6);
  }
  std::sort(latency_ms.begin(), latency_ms.end());
  std::sort(own_ms.begin(), own_ms.end());
  const double p95 = latency_ms[(latency_ms.size() * 95) / 100];
  const double median_own = own_ms[own_ms.size() / 2];
  const double p95_own = own_ms[(own_ms.size() * 95) / 100];
  std::printf(
      "%zu frames evaluated, %llu dropped, at most %d in flight; submission to "
      "completion p95 %.2f ms, network device time median %.2f ms, p95 %.2f ms\n",
      r.done.size(), (unsigned long long)dropped, most_in_flight, p95, median_own, p95_own);
  std::printf("a network started at most %.2f ms after the frames in front of it ended\n",
              most_extra_wait_ms);
  if (!warp_ms.empty()) {
    // A frame's submission (its warp queued) comes before its own upload and warp: with one
    // frame in front of it, it ends after that frame's and its own upload, warp and network.
    std::sort(warp_ms.begin(), warp_ms.end());
    std::printf(
        "warp device time median %.2f ms, p95 %.2f ms; submission to completion p95 "
        "%.2f ms against 2 x network median %.2f ms and 2 x (warp + network) median "
        "%.2f ms\n",
        warp_ms[warp_ms.size() / 2], warp_ms[(warp_ms.size() * 95) / 100], p95, 2 * median_own,
        2 * (median_own + warp_ms[warp_ms.size() / 2]));
  }
  RecordProperty("p95_latency_us", int(p95 * 1000));
  RecordProperty("network_device_us", int(median_own * 1000));

  // The latency query (opvision's answer, with opwarp's and appsrc's upstream of it): live, each
  // element's longest measured time added to the minimum and twice it (the two frames on the
  // device) to appsrc's 100 ms maximum.
  GstPad *vsrc = gst_element_get_static_pad(v_, "src");
  GstQuery *q = gst_query_new_latency();
  ASSERT_TRUE(gst_pad_query(vsrc, q));
  gboolean live = FALSE;
  GstClockTime min = 0, max = 0;
  gst_query_parse_latency(q, &live, &min, &max);
  gst_query_unref(q);
  gst_object_unref(vsrc);
  EXPECT_TRUE(live);
  EXPECT_GT(min, 0u);
  EXPECT_EQ(max, 100 * GST_MSECOND + 2 * min);
  double vision_max_ms = 0;
  g_object_get(v_, "max-time", &vision_max_ms, nullptr);
  EXPECT_GE(min, GstClockTime(vision_max_ms * GST_MSECOND) - 2);
  std::printf("latency query: live, min %.2f ms, max %.2f ms\n", min / 1e6, max / 1e6);

  // The frames opwarp let through are the frames modeld received; what it publishes is what
  // the element published, with the same frameDropPerc.
  std::vector<ModeldFrame> want;
  for (const ModeldFrame &f : Modeld(r.warped))
    if (f.published)
      want.push_back(f);
  ASSERT_EQ(r.perc.size(), want.size());
  ASSERT_FALSE(want.empty()) << "no frame was evaluated";
  for (size_t i = 0; i < want.size(); i++) {
    EXPECT_EQ(r.perc[i].first, want[i].id);
    EXPECT_NEAR(r.perc[i].second, want[i].perc, 1e-4) << "frame " << want[i].id;
  }
  EXPECT_GT(want.back().perc, 0.0) << "drops after the first ten frames show in frameDropPerc";
}

}  // namespace
