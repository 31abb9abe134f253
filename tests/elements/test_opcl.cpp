// opclupload and opcldownload on the machine's OpenCL device (PoCL in CI): context sharing,
// bit-exact round trips (packed and camera-style padded NV12, tensors), negotiation with and
// without memory:OpCLMemory, timestamps and metas, bad device strings and tensor caps, leaks.
#include <gtest/gtest.h>

#include <gst/app/gstappsink.h>
#include <gst/base/gstbasetransform.h>
#include <gst/check/gstharness.h>
#include <gst/gst.h>
#include <gst/video/video.h>

#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <random>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "op/gstop.h"
#include "system_plugins.h"

namespace {

class OpCl : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    // The leaks tracer must be chosen before gst_init (stack traces stay off: slow), and its
    // plugin found then: a folder holding only a link to it goes on the plugin path, with a
    // registry of this binary's own so the suite's shared registry is not changed.
    const char *build = g_getenv("OP_BUILD_ROOT");
    if (build && !g_getenv("GST_TRACERS")) {
      std::string dir = std::string(build) + "/tests/elements/opcl-tracers";
      std::string link = dir + "/libgstcoretracers.so";
      g_mkdir_with_parents(dir.c_str(), 0755);
      if (!g_file_test(link.c_str(), G_FILE_TEST_EXISTS))
        (void)symlink(SystemPluginFile("libgstcoretracers.so").c_str(), link.c_str());
      const char *path = g_getenv("GST_PLUGIN_PATH_1_0");
      g_setenv("GST_PLUGIN_PATH_1_0", (std::string(path ? path : "") + ":" + dir).c_str(), TRUE);
      g_setenv("GST_REGISTRY_1_0", (dir + "/registry.bin").c_str(), TRUE);
      g_setenv("GST_TRACERS", "leaks", TRUE);
    }
    g_unsetenv("GST_LEAKS_TRACER_STACK_TRACE");
    std::string why;
    if (!LoadSystemPlugins({{"coreelements", "libgstcoreelements.so"},
                            {"videotestsrc", "libgstvideotestsrc.so"},
                            {"app", "libgstapp.so"}},
                           &why))
      ADD_FAILURE() << why;
  }
};

struct Outcome {
  bool eos = false;
  std::string error;  // message + debug of the first error
};

// Plays `pipeline` until EOS or an error (30 s at most), then sets it to NULL.
Outcome PlayToEnd(GstElement *pipeline) {
  Outcome run;
  GstBus *bus = gst_element_get_bus(pipeline);
  gst_element_set_state(pipeline, GST_STATE_PLAYING);
  GstMessage *msg = gst_bus_timed_pop_filtered(
      bus, 30 * GST_SECOND, (GstMessageType)(GST_MESSAGE_EOS | GST_MESSAGE_ERROR));
  if (msg && GST_MESSAGE_TYPE(msg) == GST_MESSAGE_EOS) {
    run.eos = true;
  } else if (msg) {
    GError *err = nullptr;
    gchar *debug = nullptr;
    gst_message_parse_error(msg, &err, &debug);
    run.error = std::string(err->message) + " | " + (debug ? debug : "");
    g_error_free(err);
    g_free(debug);
  } else {
    run.error = "timed out";
  }
  if (msg)
    gst_message_unref(msg);
  gst_element_set_state(pipeline, GST_STATE_NULL);
  gst_object_unref(bus);
  return run;
}

GstElement *Parse(const std::string &desc) {
  GError *err = nullptr;
  GstElement *p = gst_parse_launch(desc.c_str(), &err);
  if (err) {
    ADD_FAILURE() << desc << ": " << err->message;
    g_error_free(err);
  }
  return p;
}

GstElement *ByName(GstElement *pipeline, const char *name) {
  return gst_bin_get_by_name(GST_BIN(pipeline), name);
}

bool PadHasOpMemory(GstElement *element, const char *pad_name) {
  GstPad *pad = gst_element_get_static_pad(element, pad_name);
  GstCaps *caps = gst_pad_get_current_caps(pad);
  bool op = caps && gst_op_caps_is_op_memory(caps);
  if (caps)
    gst_caps_unref(caps);
  gst_object_unref(pad);
  return op;
}

// The visible bytes of every plane of `buffer`, read through its GstVideoMeta.
std::vector<guint8> VisibleBytes(GstBuffer *buffer, const GstVideoInfo &caps_info) {
  GstVideoFrame frame;
  std::vector<guint8> out;
  if (!gst_video_frame_map(&frame, const_cast<GstVideoInfo *>(&caps_info), buffer, GST_MAP_READ)) {
    ADD_FAILURE() << "could not map a frame";
    return out;
  }
  for (guint p = 0; p < GST_VIDEO_FRAME_N_PLANES(&frame); p++) {
    const guint8 *data = static_cast<const guint8 *>(GST_VIDEO_FRAME_PLANE_DATA(&frame, p));
    gsize rows = gst_op_video_info_plane_rows(&caps_info, p);
    gsize row_bytes = gst_op_video_info_plane_row_bytes(&caps_info, p);
    for (gsize r = 0; r < rows; r++) {
      const guint8 *row = data + r * GST_VIDEO_FRAME_PLANE_STRIDE(&frame, p);
      out.insert(out.end(), row, row + row_bytes);
    }
  }
  gst_video_frame_unmap(&frame);
  return out;
}

std::vector<guint8> Bytes(GstBuffer *buffer) {
  GstMapInfo map;
  std::vector<guint8> out;
  if (!gst_buffer_map(buffer, &map, GST_MAP_READ))
    return out;
  out.assign(map.data, map.data + map.size);
  gst_buffer_unmap(buffer, &map);
  return out;
}

std::vector<guint8> Random(size_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::vector<guint8> v(n);
  for (auto &b : v)
    b = static_cast<guint8>(rng());
  return v;
}

constexpr int kW = 1928, kH = 1208;
const char *kNv12Caps = "video/x-raw,format=NV12,width=1928,height=1208,framerate=20/1";

GstVideoInfo TiciInfo(bool camera) {
  GstVideoInfo info;
  gst_video_info_set_format(&info, GST_VIDEO_FORMAT_NV12, kW, kH);
  if (camera)
    gst_op_video_info_set_camera_layout(&info);
  return info;
}

// A frame of random bytes (padding included) laid out like `layout`, with its GstVideoMeta,
// timestamps and a frame meta.
GstBuffer *MakeFrame(const GstVideoInfo &layout, unsigned seed) {
  auto bytes = Random(layout.size, seed);
  GstBuffer *buf = gst_buffer_new_memdup(bytes.data(), bytes.size());
  GstVideoInfo l = layout;
  gst_buffer_add_video_meta_full(buf, GST_VIDEO_FRAME_FLAG_NONE, GST_VIDEO_FORMAT_NV12, kW, kH, 2,
                                 l.offset, l.stride);
  GST_BUFFER_PTS(buf) = 50 * GST_MSECOND * seed;
  GST_BUFFER_DTS(buf) = 50 * GST_MSECOND * seed + 1;
  GST_BUFFER_DURATION(buf) = 50 * GST_MSECOND;
  GST_BUFFER_OFFSET(buf) = seed;
  GST_BUFFER_OFFSET_END(buf) = seed + 1;
  GST_BUFFER_FLAG_SET(buf, GST_BUFFER_FLAG_DISCONT);
  GstOpFrameMeta *m = gst_buffer_add_op_frame_meta(buf);
  m->road_frame_id = 1000 + seed;
  m->road_eof_ns = 123456789ull * seed;
  m->calibration_seen = TRUE;
  return buf;
}

void ExpectSameTimingAndMeta(GstBuffer *in, GstBuffer *out) {
  EXPECT_EQ(GST_BUFFER_PTS(out), GST_BUFFER_PTS(in));
  EXPECT_EQ(GST_BUFFER_DTS(out), GST_BUFFER_DTS(in));
  EXPECT_EQ(GST_BUFFER_DURATION(out), GST_BUFFER_DURATION(in));
  EXPECT_EQ(GST_BUFFER_OFFSET(out), GST_BUFFER_OFFSET(in));
  EXPECT_EQ(GST_BUFFER_OFFSET_END(out), GST_BUFFER_OFFSET_END(in));
  EXPECT_TRUE(GST_BUFFER_FLAG_IS_SET(out, GST_BUFFER_FLAG_DISCONT));
  GstOpFrameMeta *a = gst_buffer_get_op_frame_meta(in), *b = gst_buffer_get_op_frame_meta(out);
  ASSERT_NE(b, nullptr) << "the frame meta was dropped";
  EXPECT_EQ(b->road_frame_id, a->road_frame_id);
  EXPECT_EQ(b->road_eof_ns, a->road_eof_ns);
  EXPECT_EQ(b->calibration_seen, a->calibration_seen);
}

// ---- context sharing and negotiation -------------------------------------------------------

TEST_F(OpCl, TwoElementsInOnePipelineShareOneContext) {
  GstElement *p = Parse(std::string("videotestsrc num-buffers=2 ! ") + kNv12Caps +
                        " ! opclupload name=u ! opcldownload name=d ! fakesink");
  ASSERT_NE(p, nullptr);
  ASSERT_EQ(gst_element_set_state(p, GST_STATE_PAUSED), GST_STATE_CHANGE_ASYNC);
  ASSERT_EQ(gst_element_get_state(p, nullptr, nullptr, 30 * GST_SECOND), GST_STATE_CHANGE_SUCCESS);
  GstElement *u = ByName(p, "u"), *d = ByName(p, "d");
  GstOpContext *cu = gst_op_base_filter_get_context(GST_OP_BASE_FILTER(u));
  GstOpContext *cd = gst_op_base_filter_get_context(GST_OP_BASE_FILTER(d));
  ASSERT_NE(cu, nullptr);
  EXPECT_EQ(cu, cd);
  // Both answer context queries with it.
  GstPad *pad = gst_element_get_static_pad(u, "sink");
  GstQuery *q = gst_query_new_context(GST_OP_CONTEXT_TYPE);
  ASSERT_TRUE(gst_pad_query(pad, q));
  GstContext *context = nullptr;
  gst_query_parse_context(q, &context);
  GstOpContext *answered = gst_context_get_op_context(context);
  EXPECT_EQ(answered, cd);
  gst_object_unref(answered);
  gst_query_unref(q);
  gst_object_unref(pad);
  // Between them the frames stay in OpenCL memory.
  EXPECT_TRUE(PadHasOpMemory(d, "sink"));
  EXPECT_FALSE(PadHasOpMemory(d, "src"));
  gst_object_unref(u);
  gst_object_unref(d);
  gst_element_set_state(p, GST_STATE_NULL);
  gst_object_unref(p);
}

TEST_F(OpCl, DifferentStringsForTheSameDeviceShareAndOthersFail) {
  // "cpu" and "0:0" name the same device only where the first device is the CPU (PoCL).
  auto first = op::cl::SelectDevice("0:0"), cpu = op::cl::SelectDevice("cpu");
  if (!first.ok() || !cpu.ok() || first->info.device != cpu->info.device)
    GTEST_SKIP() << "needs the CPU device at 0:0";
  GstElement *p = Parse(std::string("videotestsrc num-buffers=2 ! ") + kNv12Caps +
                        " ! opclupload name=u device=cpu ! opcldownload name=d device=0:0 ! "
                        "fakesink");
  ASSERT_NE(p, nullptr);
  gst_element_set_state(p, GST_STATE_PAUSED);
  ASSERT_EQ(gst_element_get_state(p, nullptr, nullptr, 30 * GST_SECOND), GST_STATE_CHANGE_SUCCESS);
  GstElement *u = ByName(p, "u"), *d = ByName(p, "d");
  EXPECT_EQ(gst_op_base_filter_get_context(GST_OP_BASE_FILTER(u)),
            gst_op_base_filter_get_context(GST_OP_BASE_FILTER(d)));
  gst_object_unref(u);
  gst_object_unref(d);
  gst_element_set_state(p, GST_STATE_NULL);
  gst_object_unref(p);

  // A downstream element whose device does not exist must not take the upstream context.
  p = Parse(std::string("videotestsrc num-buffers=2 ! ") + kNv12Caps +
            " ! opclupload device=cpu ! opcldownload device=no-such-device-xyz ! fakesink");
  Outcome run = PlayToEnd(p);
  EXPECT_FALSE(run.eos);
  EXPECT_NE(run.error.find("no-such-device-xyz"), std::string::npos) << run.error;
  gst_object_unref(p);
}

TEST_F(OpCl, NegotiatesWithAndWithoutOpClMemory) {
  struct Case {
    const char *between;
    bool op_memory;
  } cases[] = {{"video/x-raw(memory:OpCLMemory)", true}, {"video/x-raw", false}};
  for (const Case &c : cases) {
    GstElement *p =
        Parse(std::string("videotestsrc num-buffers=3 ! "
                          "video/x-raw,format=NV12,width=64,height=48,framerate=20/1") +
              " ! opclupload ! " + c.between + " ! opcldownload name=d ! video/x-raw ! fakesink");
    ASSERT_NE(p, nullptr);
    GstElement *d = ByName(p, "d");
    gst_element_set_state(p, GST_STATE_PAUSED);
    gst_element_get_state(p, nullptr, nullptr, 30 * GST_SECOND);
    EXPECT_EQ(PadHasOpMemory(d, "sink"), c.op_memory) << c.between;
    Outcome run = PlayToEnd(p);
    EXPECT_TRUE(run.eos) << c.between << ": " << run.error;
    gst_object_unref(d);
    gst_object_unref(p);
  }
}

TEST_F(OpCl, UnknownDeviceIsAClearErrorNotACrash) {
  GstElement *p = Parse(std::string("videotestsrc num-buffers=2 ! ") + kNv12Caps +
                        " ! opclupload device=no-such-device-xyz ! fakesink");
  ASSERT_NE(p, nullptr);
  Outcome run = PlayToEnd(p);
  EXPECT_FALSE(run.eos);
  EXPECT_NE(run.error.find("no-such-device-xyz"), std::string::npos) << run.error;
  EXPECT_NE(run.error.find("not found"), std::string::npos) << run.error;
  gst_object_unref(p);
}

TEST_F(OpCl, CapsOfferTheConvertedMemoryFirst) {
  struct Case {
    const char *element;
    const char *first, *later;  // features of the first structure and of a later one
  } cases[] = {
      {"opclupload", GST_CAPS_FEATURE_MEMORY_OP_CL, GST_CAPS_FEATURE_MEMORY_SYSTEM_MEMORY},
      {"opcldownload", GST_CAPS_FEATURE_MEMORY_SYSTEM_MEMORY, GST_CAPS_FEATURE_MEMORY_OP_CL}};
  for (const Case &c : cases) {
    GstElement *e = gst_element_factory_make(c.element, nullptr);
    ASSERT_NE(e, nullptr) << c.element;
    GstPad *src = gst_element_get_static_pad(e, "src");
    GstCaps *in = gst_caps_from_string(c.later == std::string(GST_CAPS_FEATURE_MEMORY_OP_CL)
                                           ? "video/x-raw(memory:OpCLMemory),format=NV12"
                                           : "video/x-raw,format=NV12");
    // What the src pad can give when the sink pad gets `in` (no peers: templates only).
    GstCaps *out = gst_pad_query_caps(src, nullptr);
    GstCaps *given = GST_BASE_TRANSFORM_GET_CLASS(e)->transform_caps(GST_BASE_TRANSFORM(e),
                                                                     GST_PAD_SINK, in, nullptr);
    ASSERT_GE(gst_caps_get_size(given), 2u) << c.element;
    EXPECT_TRUE(gst_caps_features_contains(gst_caps_get_features(given, 0), c.first))
        << c.element << ": " << gst_caps_to_string(given);
    EXPECT_TRUE(gst_caps_features_contains(gst_caps_get_features(given, 1), c.later))
        << c.element << ": " << gst_caps_to_string(given);
    EXPECT_FALSE(gst_caps_is_empty(out));
    gst_caps_unref(given);
    gst_caps_unref(out);
    gst_caps_unref(in);
    gst_object_unref(src);
    gst_object_unref(e);
  }
}

// A harness sink pad that answers allocation queries with `pool` (the other queries as usual).
struct PoolOffer {
  static inline GstBufferPool *pool = nullptr;
  static inline GstPadQueryFunction harness_query = nullptr;
  static gboolean Query(GstPad *pad, GstObject *parent, GstQuery *query) {
    if (GST_QUERY_TYPE(query) != GST_QUERY_ALLOCATION || !pool)
      return harness_query(pad, parent, query);
    GstCaps *caps = nullptr;
    gst_query_parse_allocation(query, &caps, nullptr);
    GstStructure *config = gst_buffer_pool_get_config(pool);
    gst_buffer_pool_config_set_params(config, caps, 0, 0, 0);
    if (!gst_buffer_pool_set_config(pool, config))
      return FALSE;
    config = gst_buffer_pool_get_config(pool);
    guint size = 0;
    gst_buffer_pool_config_get_params(config, nullptr, &size, nullptr, nullptr);
    gst_structure_free(config);
    gst_query_add_allocation_pool(query, pool, size, 0, 0);
    gst_query_add_allocation_meta(query, GST_VIDEO_META_API_TYPE, nullptr);
    return TRUE;
  }
};

TEST_F(OpCl, ReusesADownstreamPoolOnlyIfItIsOursOnTheSameContext) {
  auto ctx = gst_op_context_new("auto");
  ASSERT_TRUE(ctx.ok()) << ctx.status().ToString();
  auto other = gst_op_context_new("auto");
  ASSERT_TRUE(other.ok()) << other.status().ToString();
  const char *op_caps =
      "video/x-raw(memory:OpCLMemory),format=NV12,width=64,height=48,framerate=20/1";
  GstVideoInfo info;
  gst_video_info_set_format(&info, GST_VIDEO_FORMAT_NV12, 64, 48);
  struct Case {
    GstBufferPool *pool;
    bool reused;
  } cases[] = {{gst_op_buffer_pool_new(*ctx), true},
               {gst_op_buffer_pool_new(*other), false},  // ours, another cl_context
               {gst_buffer_pool_new(), false}};
  for (const Case &c : cases) {
    // The context is set before the harness starts the element, so start() adopts it.
    GstElement *upload = gst_element_factory_make("opclupload", nullptr);
    GstContext *context = gst_context_new_op_context(*ctx);
    gst_element_set_context(upload, context);
    gst_context_unref(context);
    GstHarness *h = gst_harness_new_with_element(upload, "sink", "src");
    gst_object_unref(upload);
    ASSERT_EQ(gst_op_base_filter_get_context(GST_OP_BASE_FILTER(h->element)), *ctx);
    PoolOffer::pool = c.pool;
    PoolOffer::harness_query = GST_PAD_QUERYFUNC(h->sinkpad);
    gst_pad_set_query_function(h->sinkpad, PoolOffer::Query);
    gst_harness_set_src_caps_str(h, "video/x-raw,format=NV12,width=64,height=48,framerate=20/1");
    gst_harness_set_sink_caps_str(h, op_caps);
    GstBuffer *in = gst_buffer_new_allocate(nullptr, info.size, nullptr);
    ASSERT_EQ(gst_harness_push(h, in), GST_FLOW_OK);
    GstBuffer *out = gst_harness_pull(h);
    ASSERT_NE(out, nullptr);
    EXPECT_TRUE(gst_is_op_memory(gst_buffer_peek_memory(out, 0)));
    EXPECT_EQ(out->pool == c.pool, c.reused) << G_OBJECT_TYPE_NAME(c.pool);
    gst_buffer_unref(out);
    gst_harness_teardown(h);
    PoolOffer::pool = nullptr;
    gst_object_unref(c.pool);
  }
  gst_object_unref(*other);
  gst_object_unref(*ctx);
}

// ---- bytes --------------------------------------------------------------------------------

TEST_F(OpCl, RandomVideoTestSrcRoundTripIsBitExact) {
  GstElement *p =
      Parse(std::string("videotestsrc pattern=snow num-buffers=4 ! ") + kNv12Caps +
            " ! tee name=t t. ! queue ! appsink name=ref sync=false t. ! queue ! opclupload ! "
            "opcldownload name=d ! appsink name=out sync=false");
  ASSERT_NE(p, nullptr);
  GstElement *ref = ByName(p, "ref"), *out = ByName(p, "out"), *d = ByName(p, "d");
  gst_element_set_state(p, GST_STATE_PLAYING);
  GstVideoInfo info = TiciInfo(false);
  int frames = 0;
  for (;;) {
    GstSample *a = gst_app_sink_try_pull_sample(GST_APP_SINK(ref), 30 * GST_SECOND);
    GstSample *b = gst_app_sink_try_pull_sample(GST_APP_SINK(out), 30 * GST_SECOND);
    ASSERT_EQ(a == nullptr, b == nullptr) << "one branch ended early at frame " << frames;
    if (!a)
      break;
    GstBuffer *ba = gst_sample_get_buffer(a), *bb = gst_sample_get_buffer(b);
    EXPECT_EQ(GST_BUFFER_PTS(ba), GST_BUFFER_PTS(bb));
    auto va = VisibleBytes(ba, info), vb = VisibleBytes(bb, info);
    ASSERT_EQ(va.size(), size_t(kW) * kH * 3 / 2);
    EXPECT_TRUE(va == vb) << "frame " << frames << " differs";
    frames++;
    gst_sample_unref(a);
    gst_sample_unref(b);
  }
  EXPECT_EQ(frames, 4);
  EXPECT_TRUE(PadHasOpMemory(d, "sink"));
  gst_element_set_state(p, GST_STATE_NULL);
  gst_object_unref(ref);
  gst_object_unref(out);
  gst_object_unref(d);
  gst_object_unref(p);
}

TEST_F(OpCl, CameraStridesStayPaddedThroughUploadAndDownload) {
  GstVideoInfo camera = TiciInfo(true);
  ASSERT_EQ(camera.stride[0], 2048);
  ASSERT_EQ(camera.offset[1], 2490368u);
  GstHarness *h = gst_harness_new_parse("opclupload ! opcldownload");
  gst_harness_add_propose_allocation_meta(h, GST_VIDEO_META_API_TYPE, nullptr);
  gst_harness_set_src_caps_str(h, kNv12Caps);
  for (unsigned i = 1; i <= 3; i++) {
    GstBuffer *in = MakeFrame(camera, i);
    GstBuffer *keep = gst_buffer_ref(in);
    ASSERT_EQ(gst_harness_push(h, in), GST_FLOW_OK);
    GstBuffer *out = gst_harness_pull(h);
    ASSERT_NE(out, nullptr);
    GstVideoMeta *meta = gst_buffer_get_video_meta(out);
    ASSERT_NE(meta, nullptr);
    EXPECT_EQ(meta->stride[0], 2048);
    EXPECT_EQ(meta->stride[1], 2048);
    EXPECT_EQ(meta->offset[1], 2490368u);
    // Same layout end to end: every byte, padding included, comes back.
    EXPECT_TRUE(Bytes(out) == Bytes(keep)) << "frame " << i;
    ExpectSameTimingAndMeta(keep, out);
    gst_buffer_unref(out);
    gst_buffer_unref(keep);
  }
  gst_harness_teardown(h);
}

TEST_F(OpCl, UploadKeepsThePaddedLayoutInOpenClMemory) {
  GstVideoInfo camera = TiciInfo(true);
  GstHarness *h = gst_harness_new("opclupload");
  gst_harness_set_src_caps_str(h, kNv12Caps);
  gst_harness_set_sink_caps_str(
      h, "video/x-raw(memory:OpCLMemory),format=NV12,width=1928,height=1208,framerate=20/1");
  GstBuffer *in = MakeFrame(camera, 7);
  GstBuffer *keep = gst_buffer_ref(in);
  ASSERT_EQ(gst_harness_push(h, in), GST_FLOW_OK);
  GstBuffer *out = gst_harness_pull(h);
  ASSERT_NE(out, nullptr);
  ASSERT_EQ(gst_buffer_n_memory(out), 1u);
  GstMemory *mem = gst_buffer_peek_memory(out, 0);
  EXPECT_TRUE(gst_is_op_memory(mem));
  EXPECT_TRUE(gst_op_memory_get_write_event(mem)) << "the upload's event must travel with it";
  GstVideoMeta *meta = gst_buffer_get_video_meta(out);
  ASSERT_NE(meta, nullptr);
  EXPECT_EQ(meta->stride[0], 2048);
  EXPECT_EQ(meta->offset[1], 2490368u);
  // A host map waits for the upload and shows the same frame.
  EXPECT_TRUE(VisibleBytes(out, TiciInfo(false)) == VisibleBytes(keep, TiciInfo(false)));
  ExpectSameTimingAndMeta(keep, out);
  gst_buffer_unref(out);
  gst_buffer_unref(keep);
  gst_harness_teardown(h);
}

TEST_F(OpCl, DownloadRepacksWhenDownstreamTakesNoVideoMeta) {
  GstVideoInfo camera = TiciInfo(true), packed = TiciInfo(false);
  GstHarness *h = gst_harness_new_parse("opclupload ! opcldownload");
  gst_harness_set_src_caps_str(h, kNv12Caps);
  GstBuffer *in = MakeFrame(camera, 9);
  GstBuffer *keep = gst_buffer_ref(in);
  ASSERT_EQ(gst_harness_push(h, in), GST_FLOW_OK);
  GstBuffer *out = gst_harness_pull(h);
  ASSERT_NE(out, nullptr);
  EXPECT_EQ(gst_buffer_get_size(out), packed.size);
  // Read as a packed frame without looking at any meta.
  auto bytes = Bytes(out);
  auto want = VisibleBytes(keep, packed);
  EXPECT_TRUE(std::vector<guint8>(bytes.begin(), bytes.begin() + want.size()) == want);
  gst_buffer_unref(out);
  gst_buffer_unref(keep);
  gst_harness_teardown(h);
}

TEST_F(OpCl, TensorsRoundTripOneMemoryPerTensor) {
  const char *caps =
      "application/x-op-tensors, names=(string)<\"a\", \"b\">, types=(string)<\"float32\", "
      "\"uint8\">, dims=(string)<\"1,3,13\", \"127\">";
  GstHarness *h = gst_harness_new_parse("opclupload ! opcldownload");
  gst_harness_set_src_caps_str(h, caps);
  auto a = Random(3 * 13 * 4, 1), b = Random(127, 2);
  // Per-tensor memories, then the same bytes as one blob: both come out as two memories.
  GstBuffer *split = gst_buffer_new();
  gst_buffer_append_memory(
      split, gst_memory_new_wrapped((GstMemoryFlags)0, g_memdup2(a.data(), a.size()), a.size(), 0,
                                    a.size(), nullptr, nullptr));
  gst_buffer_append_memory(
      split, gst_memory_new_wrapped((GstMemoryFlags)0, g_memdup2(b.data(), b.size()), b.size(), 0,
                                    b.size(), nullptr, nullptr));
  std::vector<guint8> blob(a);
  blob.insert(blob.end(), b.begin(), b.end());
  GstBuffer *whole = gst_buffer_new_memdup(blob.data(), blob.size());
  for (GstBuffer *in : {split, whole}) {
    GST_BUFFER_PTS(in) = 42 * GST_MSECOND;
    ASSERT_EQ(gst_harness_push(h, in), GST_FLOW_OK);
    GstBuffer *out = gst_harness_pull(h);
    ASSERT_NE(out, nullptr);
    ASSERT_EQ(gst_buffer_n_memory(out), 2u);
    EXPECT_EQ(GST_BUFFER_PTS(out), 42 * GST_MSECOND);
    GstMapInfo m0, m1;
    ASSERT_TRUE(gst_buffer_map_range(out, 0, 1, &m0, GST_MAP_READ));
    ASSERT_TRUE(gst_buffer_map_range(out, 1, 1, &m1, GST_MAP_READ));
    EXPECT_TRUE(std::vector<guint8>(m0.data, m0.data + m0.size) == a);
    EXPECT_TRUE(std::vector<guint8>(m1.data, m1.data + m1.size) == b);
    gst_buffer_unmap(out, &m0);
    gst_buffer_unmap(out, &m1);
    gst_buffer_unref(out);
  }
  gst_harness_teardown(h);
}

TEST_F(OpCl, MalformedTensorCapsAreRejectedWithAMessage) {
  GstElement *p = Parse(
      "appsrc name=src caps=\"application/x-op-tensors,names=a,types=float8,dims=(string)1\" ! "
      "opclupload ! application/x-op-tensors(memory:OpCLMemory) ! fakesink");
  ASSERT_NE(p, nullptr);
  GstElement *src = ByName(p, "src");
  gst_element_set_state(p, GST_STATE_PLAYING);
  GstBuffer *buf = gst_buffer_new_allocate(nullptr, 4, nullptr);
  GstFlowReturn ret = GST_FLOW_OK;
  g_signal_emit_by_name(src, "push-buffer", buf, &ret);
  gst_buffer_unref(buf);
  g_signal_emit_by_name(src, "end-of-stream", &ret);
  Outcome run = PlayToEnd(p);
  EXPECT_FALSE(run.eos);
  EXPECT_NE(run.error.find("float8"), std::string::npos) << run.error;
  EXPECT_NE(run.error.find("field types"), std::string::npos) << run.error;
  gst_object_unref(src);
  gst_object_unref(p);
}

// ---- leaks --------------------------------------------------------------------------------

GstTracer *LeaksTracer() {
  GList *tracers = gst_tracing_get_active_tracers();
  GstTracer *found = nullptr;
  for (GList *l = tracers; l; l = l->next)
    if (!found && g_str_equal(G_OBJECT_TYPE_NAME(l->data), "GstLeaksTracer"))
      found = GST_TRACER(gst_object_ref(l->data));
  g_list_free_full(tracers, gst_object_unref);
  return found;
}

// Counts of "type-name@address" in list field `field` of a leaks-tracer checkpoint.
std::map<std::string, int> CheckpointObjects(const GstStructure *checkpoint, const char *field) {
  std::map<std::string, int> out;
  const GValue *list = gst_structure_get_value(checkpoint, field);
  for (guint i = 0; list && i < gst_value_list_get_size(list); i++) {
    const GstStructure *s = gst_value_get_structure(gst_value_list_get_value(list, i));
    out[std::string(gst_structure_get_string(s, "type-name")) + "@" +
        gst_structure_get_string(s, "address")]++;
  }
  return out;
}

// What was created and not destroyed between start-tracking and now.
std::string AliveSinceStart(GstTracer *tracer) {
  GstStructure *checkpoint = nullptr;
  g_signal_emit_by_name(tracer, "activity-get-checkpoint", &checkpoint);
  if (!checkpoint)
    return "no checkpoint";
  auto created = CheckpointObjects(checkpoint, "objects-created-list");
  auto removed = CheckpointObjects(checkpoint, "objects-removed-list");
  gst_structure_free(checkpoint);
  std::string alive;
  for (const auto &[object, n] : created)
    if (n > removed[object])
      alive += object + " ";
  return alive;
}

TEST_F(OpCl, NothingLeaksAcrossAPipelineRun) {
  GstTracer *tracer = LeaksTracer();
  if (!tracer)
    GTEST_SKIP() << "the leaks tracer is not active (GST_TRACERS=" << g_getenv("GST_TRACERS")
                 << ")";
  auto run_once = [] {
    GstElement *p = Parse(std::string("videotestsrc pattern=snow num-buffers=10 ! ") + kNv12Caps +
                          " ! opclupload ! opcldownload ! fakesink");
    Outcome run = PlayToEnd(p);
    EXPECT_TRUE(run.eos) << run.error;
    gst_object_unref(p);
  };
  run_once();  // class and plugin initialisation create objects that live forever

  // The check can fail: an object kept alive on purpose is reported.
  g_signal_emit_by_name(tracer, "activity-start-tracking");
  GstBuffer *canary = gst_buffer_new();
  std::string alive = AliveSinceStart(tracer);
  EXPECT_NE(alive.find("GstBuffer@"), std::string::npos) << "the tracer missed a live buffer";
  gst_buffer_unref(canary);
  g_signal_emit_by_name(tracer, "activity-stop-tracking");

  g_signal_emit_by_name(tracer, "activity-start-tracking");
  run_once();
  // Streaming threads drop their last task reference just after the pads stop them, so give
  // the thread pool a moment; anything still alive after that is a leak. (Checkpoints are
  // relative to the previous one, so each attempt only looks at what the last one missed.)
  std::map<std::string, int> pending;
  for (int attempt = 0; attempt < 20; attempt++) {
    GstStructure *checkpoint = nullptr;
    g_signal_emit_by_name(tracer, "activity-get-checkpoint", &checkpoint);
    ASSERT_NE(checkpoint, nullptr);
    for (const auto &[object, n] : CheckpointObjects(checkpoint, "objects-created-list"))
      pending[object] += n;
    for (const auto &[object, n] : CheckpointObjects(checkpoint, "objects-removed-list"))
      if (pending.count(object))
        pending[object] -= n;
    gst_structure_free(checkpoint);
    alive.clear();
    for (const auto &[object, n] : pending)
      if (n > 0)
        alive += object + " ";
    if (alive.empty())
      break;
    g_usleep(100 * 1000);
  }
  g_signal_emit_by_name(tracer, "activity-stop-tracking");
  EXPECT_TRUE(alive.empty()) << "alive after the run: " << alive;
  gst_object_unref(tracer);
}

}  // namespace
