// opwarp on the machine's OpenCL device (PoCL in CI): caps, bytes against the C++ reference warp
// (which is itself checked against hand-worked answers and numpy), the history, both memories,
// DMABuf input, camera strides, properties, the calibration event, bad input, and the gst-launch
// pipeline.
#include <gst/allocators/gstdmabuf.h>
#include <gst/check/gstharness.h>
#include <gst/gst.h>
#include <gst/video/video.h>
#include <gtest/gtest.h>

#include <sys/mman.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <iterator>
#include <random>
#include <string>
#include <vector>

#include "drive/warp.h"
#include "op/gstop.h"
#include "system_plugins.h"

using namespace op;
using namespace op::drive;

namespace {

constexpr const char *kTiciCaps = "video/x-raw,format=NV12,width=1928,height=1208,framerate=20/1";

void InitGst() {
  static bool done = false;
  if (!done) {
    gst_init(nullptr, nullptr);
    done = true;
  }
}

std::vector<uint8_t> RandomBytes(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<uint8_t> v(n);
  for (auto &b : v)
    b = uint8_t(rng());
  return v;
}

// The prepared frame the contract says `frame` becomes.
std::vector<uint8_t> Expected(const std::vector<uint8_t> &frame, const Nv12Layout &l,
                              const Intrinsics &camera, ModelFrame model, const Rpy &rpy) {
  std::vector<uint8_t> out(kFrameTensorBytes);
  const KernelMatrices m = ToKernelMatrices(WarpMatrix(camera, ModelIntrinsics(model), rpy));
  Status s = WarpReference(frame.data(), frame.size(), l, m, out.data());
  EXPECT_TRUE(s.ok()) << s.ToString();
  return out;
}

Intrinsics TiciRoad() {
  return CameraIntrinsics(DeviceType::kTici, CameraRole::kRoad);
}

GstBuffer *Wrap(const std::vector<uint8_t> &bytes, GstClockTime pts) {
  GstBuffer *b = gst_buffer_new_memdup(bytes.data(), bytes.size());
  GST_BUFFER_PTS(b) = pts;
  GST_BUFFER_DURATION(b) = GST_SECOND / 20;
  return b;
}

// The bytes of an output buffer (mapping waits for the device when it is OpenCL memory).
std::vector<uint8_t> Bytes(GstBuffer *b) {
  GstMapInfo map;
  EXPECT_TRUE(gst_buffer_map(b, &map, GST_MAP_READ));
  std::vector<uint8_t> v(map.data, map.data + map.size);
  gst_buffer_unmap(b, &map);
  return v;
}

// "" when `got` at `offset` equals `want`, else where the first difference is.
std::string Diff(const std::vector<uint8_t> &got, size_t offset, const std::vector<uint8_t> &want) {
  if (got.size() < offset + want.size())
    return "output too short: " + std::to_string(got.size());
  size_t n = 0, first = 0;
  for (size_t i = 0; i < want.size(); i++)
    if (got[offset + i] != want[i] && n++ == 0)
      first = i;
  if (!n)
    return "";
  return std::to_string(n) + " bytes differ, first at channel " +
         std::to_string(first / kPlaneBytes) + " index " + std::to_string(first % kPlaneBytes);
}

// Messages of `type` on `bus` joined into one string.
std::string Drain(GstBus *bus, GstMessageType type) {
  std::string all;
  while (GstMessage *msg = gst_bus_pop_filtered(bus, type)) {
    GError *err = nullptr;
    gchar *debug = nullptr;
    if (type == GST_MESSAGE_ERROR)
      gst_message_parse_error(msg, &err, &debug);
    else
      gst_message_parse_warning(msg, &err, &debug);
    all += std::string(err->message) + " | " + (debug ? debug : "") + "\n";
    g_clear_error(&err);
    g_free(debug);
    gst_message_unref(msg);
  }
  return all;
}

class OpWarpTest : public ::testing::Test {
 protected:
  void SetUp() override {
    InitGst();
    GstElementFactory *factory = gst_element_factory_find("opwarp");
    if (!factory)
      FAIL() << "opwarp is not in the registry (GST_PLUGIN_PATH_1_0 should name the build)";
    gst_object_unref(factory);
  }
  void TearDown() override {
    if (h)
      gst_harness_teardown(h);
    if (bus)
      gst_object_unref(bus);
  }
  // A harness around a new opwarp with `props` set, posting to `bus`.
  void Make(const char *launch, GstContext *context = nullptr) {
    GError *err = nullptr;
    GstElement *e = gst_parse_launch(launch, &err);
    ASSERT_NE(e, nullptr) << (err ? err->message : "");
    bus = gst_bus_new();
    gst_element_set_bus(e, bus);
    if (context)
      gst_element_set_context(e, context);
    h = gst_harness_new_with_element(e, "sink", "src");
    gst_object_unref(e);
  }
  GstHarness *h = nullptr;
  GstBus *bus = nullptr;
};

}  // namespace

TEST_F(OpWarpTest, CapsTimestampsMetaAndReferenceBytes) {
  Make("opwarp rpy=0,0.02,-0.01");
  gst_harness_set_src_caps_str(h, kTiciCaps);
  const Nv12Layout l = Nv12Layout::Tight(1928, 1208);
  const std::vector<uint8_t> frame = RandomBytes(l.MinBytes(), 1);
  ASSERT_EQ(gst_harness_push(h, Wrap(frame, 5 * GST_SECOND)), GST_FLOW_OK);
  GstBuffer *out = gst_harness_pull(h);
  ASSERT_NE(out, nullptr);
  EXPECT_EQ(gst_buffer_get_size(out), 12u * 128 * 256);
  EXPECT_EQ(GST_BUFFER_PTS(out), 5 * GST_SECOND);
  EXPECT_EQ(GST_BUFFER_DURATION(out), GST_SECOND / 20);
  GstOpFrameMeta *meta = gst_buffer_get_op_frame_meta(out);
  ASSERT_NE(meta, nullptr);
  EXPECT_TRUE(meta->calibration_seen);
  EXPECT_GT(meta->stage_ns[GST_OP_STAGE_WARP], 0u);
  EXPECT_EQ(meta->road_eof_ns, 5 * GST_SECOND);

  GstCaps *caps = gst_pad_get_current_caps(h->sinkpad);
  ASSERT_NE(caps, nullptr);
  auto info = gst_op_tensor_info_from_caps(caps);
  gst_caps_unref(caps);
  ASSERT_TRUE(info.ok()) << info.status().ToString();
  ASSERT_EQ(info->tensors.size(), 1u);
  EXPECT_EQ(info->tensors[0].name, "img");
  EXPECT_EQ(info->tensors[0].type, GstOpTensorType::kUint8);
  EXPECT_EQ(info->tensors[0].dims, (std::vector<int64_t>{1, 12, 128, 256}));

  const std::vector<uint8_t> got = Bytes(out);
  EXPECT_EQ(Diff(got, 0, std::vector<uint8_t>(kFrameTensorBytes, 0)), "") << "t-4 is zeros";
  EXPECT_EQ(Diff(got, kFrameTensorBytes,
                 Expected(frame, l, TiciRoad(), ModelFrame::kMedmodel, {0, 0.02, -0.01})),
            "");
  gst_buffer_unref(out);
}

TEST_F(OpWarpTest, HistoryEmitsFrameTMinus4ThenFrameT) {
  Make("opwarp rpy=0.01,-0.02,0.03");
  gst_harness_set_src_caps_str(h, kTiciCaps);
  const Nv12Layout l = Nv12Layout::Tight(1928, 1208);
  std::vector<std::vector<uint8_t>> prepared;
  for (int t = 0; t < 7; t++) {
    const std::vector<uint8_t> frame = RandomBytes(l.MinBytes(), 100 + t);
    prepared.push_back(Expected(frame, l, TiciRoad(), ModelFrame::kMedmodel, {0.01, -0.02, 0.03}));
    ASSERT_EQ(gst_harness_push(h, Wrap(frame, t * GST_SECOND / 20)), GST_FLOW_OK);
    GstBuffer *out = gst_harness_pull(h);
    ASSERT_NE(out, nullptr);
    const std::vector<uint8_t> got = Bytes(out);
    gst_buffer_unref(out);
    const std::vector<uint8_t> zeros(kFrameTensorBytes, 0);
    EXPECT_EQ(Diff(got, 0, t >= 4 ? prepared[t - 4] : zeros), "") << "frame " << t << " (t-4)";
    EXPECT_EQ(Diff(got, kFrameTensorBytes, prepared[t]), "") << "frame " << t << " (t)";
  }
}

TEST_F(OpWarpTest, CameraStridesFromVideoMeta) {
  // System memory laid out like the camera daemon's frames, described by a GstVideoMeta.
  Make("opwarp rpy=0,0.02,-0.01");
  gst_harness_set_src_caps_str(h, kTiciCaps);
  const Nv12Layout l = Nv12Layout::Camera(1928, 1208);
  ASSERT_EQ(l.uv_offset, 2490368u);
  const std::vector<uint8_t> frame = RandomBytes(l.uv_offset + l.uv_stride * 604, 7);
  GstBuffer *in = Wrap(frame, 0);
  gsize offsets[4] = {0, l.uv_offset, 0, 0};
  gint strides[4] = {2048, 2048, 0, 0};
  gst_buffer_add_video_meta_full(in, GST_VIDEO_FRAME_FLAG_NONE, GST_VIDEO_FORMAT_NV12, 1928, 1208,
                                 2, offsets, strides);
  ASSERT_EQ(gst_harness_push(h, in), GST_FLOW_OK);
  GstBuffer *out = gst_harness_pull(h);
  ASSERT_NE(out, nullptr);
  EXPECT_EQ(Diff(Bytes(out), kFrameTensorBytes,
                 Expected(frame, l, TiciRoad(), ModelFrame::kMedmodel, {0, 0.02, -0.01})),
            "");
  gst_buffer_unref(out);
}

TEST_F(OpWarpTest, PlanesInSeparateMemories) {
  // Y and UV in two GstMemory blocks of one buffer (GstVideoMeta offsets are buffer offsets).
  Make("opwarp rpy=0,0.02,-0.01");
  gst_harness_set_src_caps_str(h, kTiciCaps);
  const Nv12Layout l = Nv12Layout::Tight(1928, 1208);
  const std::vector<uint8_t> frame = RandomBytes(l.MinBytes(), 8);
  GstBuffer *in = gst_buffer_new();
  gst_buffer_append_memory(
      in, gst_memory_new_wrapped(GST_MEMORY_FLAG_READONLY, g_memdup2(frame.data(), l.uv_offset),
                                 l.uv_offset, 0, l.uv_offset, nullptr, g_free));
  const size_t uv_bytes = frame.size() - l.uv_offset;
  gst_buffer_append_memory(
      in, gst_memory_new_wrapped(GST_MEMORY_FLAG_READONLY,
                                 g_memdup2(frame.data() + l.uv_offset, uv_bytes), uv_bytes, 0,
                                 uv_bytes, nullptr, g_free));
  ASSERT_EQ(gst_harness_push(h, in), GST_FLOW_OK);
  GstBuffer *out = gst_harness_pull(h);
  ASSERT_NE(out, nullptr);
  EXPECT_EQ(Diff(Bytes(out), kFrameTensorBytes,
                 Expected(frame, l, TiciRoad(), ModelFrame::kMedmodel, {0, 0.02, -0.01})),
            "");
  gst_buffer_unref(out);
}

TEST_F(OpWarpTest, FlushStartsTheHistoryAgain) {
  Make("opwarp");
  gst_harness_set_src_caps_str(h, kTiciCaps);
  const Nv12Layout l = Nv12Layout::Tight(1928, 1208);
  std::vector<std::vector<uint8_t>> prepared;
  auto push = [&](uint32_t seed) -> std::vector<uint8_t> {
    const std::vector<uint8_t> frame = RandomBytes(l.MinBytes(), seed);
    prepared.push_back(Expected(frame, l, TiciRoad(), ModelFrame::kMedmodel, {}));
    EXPECT_EQ(gst_harness_push(h, Wrap(frame, 0)), GST_FLOW_OK);
    GstBuffer *out = gst_harness_pull(h);
    EXPECT_NE(out, nullptr);
    std::vector<uint8_t> got = out ? Bytes(out) : std::vector<uint8_t>();
    if (out)
      gst_buffer_unref(out);
    return got;
  };
  for (uint32_t t = 0; t < 5; t++)
    push(20 + t);
  ASSERT_TRUE(gst_harness_push_event(h, gst_event_new_flush_start()));
  ASSERT_TRUE(gst_harness_push_event(h, gst_event_new_flush_stop(TRUE)));
  GstSegment segment;
  gst_segment_init(&segment, GST_FORMAT_TIME);
  ASSERT_TRUE(gst_harness_push_event(h, gst_event_new_segment(&segment)));
  // Five frames went in before the flush: without the reset, t-4 would be the second of them.
  const std::vector<uint8_t> got = push(30);
  EXPECT_EQ(Diff(got, 0, std::vector<uint8_t>(kFrameTensorBytes, 0)), "");
  EXPECT_EQ(Diff(got, kFrameTensorBytes, prepared.back()), "");
}

TEST_F(OpWarpTest, OpenClMemoryInAndOut) {
  // Frames already on the device (camera layout, from our pool) and a device-memory output
  // sharing the same context; mapping the output waits for its event.
  auto ctx = gst_op_context_new("auto");
  ASSERT_TRUE(ctx.ok()) << ctx.status().ToString();
  GstContext *context = gst_context_new_op_context(*ctx);
  Make("opwarp model-input=big_img rpy=0.02,0.01,-0.03", context);
  gst_context_unref(context);
  const char *caps_str =
      "video/x-raw(memory:OpCLMemory),format=NV12,width=1344,height=760,framerate=20/1";
  gst_harness_set_src_caps_str(h, caps_str);
  gst_harness_set_sink_caps_str(h, "application/x-op-tensors(memory:OpCLMemory)");

  GstBufferPool *pool = gst_op_buffer_pool_new(*ctx);
  GstCaps *caps = gst_caps_from_string(caps_str);
  GstStructure *config = gst_buffer_pool_get_config(pool);
  gst_buffer_pool_config_set_params(config, caps, 0, 2, 0);
  gst_buffer_pool_config_add_option(config, GST_BUFFER_POOL_OPTION_VIDEO_META);
  gst_buffer_pool_config_set_op_camera_layout(config);
  gst_caps_unref(caps);
  ASSERT_TRUE(gst_buffer_pool_set_config(pool, config));
  ASSERT_TRUE(gst_buffer_pool_set_active(pool, TRUE));

  const Nv12Layout l = Nv12Layout::Camera(1344, 760);
  const Intrinsics wide = CameraIntrinsics(DeviceType::kMici, CameraRole::kWide);
  std::vector<std::vector<uint8_t>> prepared;
  for (int t = 0; t < 6; t++) {
    GstBuffer *in = nullptr;
    ASSERT_EQ(gst_buffer_pool_acquire_buffer(pool, &in, nullptr), GST_FLOW_OK);
    GstVideoMeta *vmeta = gst_buffer_get_video_meta(in);
    ASSERT_NE(vmeta, nullptr);
    ASSERT_EQ(vmeta->stride[0], 1408);
    ASSERT_EQ(vmeta->offset[1], l.uv_offset);
    std::vector<uint8_t> frame = RandomBytes(gst_buffer_get_size(in), 300 + t);
    gst_buffer_fill(in, 0, frame.data(), frame.size());
    prepared.push_back(Expected(frame, l, wide, ModelFrame::kSbigmodel, {0.02, 0.01, -0.03}));
    ASSERT_EQ(gst_harness_push(h, in), GST_FLOW_OK);
    GstBuffer *out = gst_harness_pull(h);
    ASSERT_NE(out, nullptr);
    ASSERT_TRUE(gst_is_op_memory(gst_buffer_peek_memory(out, 0)));
    const std::vector<uint8_t> got = Bytes(out);
    gst_buffer_unref(out);
    const std::vector<uint8_t> zeros(kFrameTensorBytes, 0);
    EXPECT_EQ(Diff(got, 0, t >= 4 ? prepared[t - 4] : zeros), "") << "frame " << t;
    EXPECT_EQ(Diff(got, kFrameTensorBytes, prepared[t]), "") << "frame " << t;
  }
  GstCaps *out_caps = gst_pad_get_current_caps(h->sinkpad);
  auto info = gst_op_tensor_info_from_caps(out_caps);
  gst_caps_unref(out_caps);
  ASSERT_TRUE(info.ok());
  EXPECT_EQ(info->tensors[0].name, "big_img");
  gst_buffer_pool_set_active(pool, FALSE);
  gst_object_unref(pool);
  gst_object_unref(*ctx);
}

// A camera-style frame in a memfd wrapped as a dmabuf memory, like a camera's buffer, with the
// GstVideoMeta that describes its strides.
GstBuffer *DmabufFrame(GstAllocator *dmabuf, const std::vector<uint8_t> &bytes, const Nv12Layout &l,
                       GstClockTime pts) {
  int fd = memfd_create("op-test-warp-frame", MFD_CLOEXEC);
  if (fd < 0) {
    ADD_FAILURE() << "memfd_create: " << g_strerror(errno);
    return nullptr;
  }
  if (ftruncate(fd, off_t(bytes.size())) != 0 ||
      pwrite(fd, bytes.data(), bytes.size(), 0) != ssize_t(bytes.size())) {
    ADD_FAILURE() << "writing the memfd: " << g_strerror(errno);
    close(fd);
    return nullptr;
  }
  GstBuffer *b = gst_buffer_new();
  gst_buffer_append_memory(b, gst_dmabuf_allocator_alloc(dmabuf, fd, bytes.size()));
  gsize offsets[4] = {l.y_offset, l.uv_offset, 0, 0};
  gint strides[4] = {gint(l.y_stride), gint(l.uv_stride), 0, 0};
  gst_buffer_add_video_meta_full(b, GST_VIDEO_FRAME_FLAG_NONE, GST_VIDEO_FORMAT_NV12, l.width,
                                 l.height, 2, offsets, strides);
  GST_BUFFER_PTS(b) = pts;
  GST_BUFFER_DURATION(b) = GST_SECOND / 20;
  return b;
}

TEST_F(OpWarpTest, DmabufInputGivesTheSameTensorsAsSystemMemory) {
  // The same camera-style frames as system memory and as dmabuf memories: the tensors must be
  // equal byte for byte (and equal the reference). Where the device cannot import a dmabuf the
  // frames are uploaded after exactly one warning; where it can, there is none.
  const Nv12Layout l = Nv12Layout::Camera(1928, 1208);
  const char *kProps = "opwarp rpy=0.01,0.02,-0.01";
  std::vector<std::vector<uint8_t>> frames;
  for (int t = 0; t < 6; t++)
    frames.push_back(RandomBytes(l.uv_offset + l.uv_stride * 604, 400 + t));

  auto run = [&](bool dmabuf) {
    std::vector<std::vector<uint8_t>> outs;
    GstAllocator *allocator = gst_dmabuf_allocator_new();
    Make(kProps);
    gst_harness_set_src_caps_str(
        h, dmabuf ? "video/x-raw(memory:DMABuf),format=NV12,width=1928,height=1208,framerate=20/1"
                  : kTiciCaps);
    for (size_t t = 0; t < frames.size(); t++) {
      const GstClockTime pts = t * GST_SECOND / 20;
      GstBuffer *in;
      if (dmabuf) {
        in = DmabufFrame(allocator, frames[t], l, pts);
      } else {
        in = Wrap(frames[t], pts);
        gsize offsets[4] = {0, l.uv_offset, 0, 0};
        gint strides[4] = {gint(l.y_stride), gint(l.uv_stride), 0, 0};
        gst_buffer_add_video_meta_full(in, GST_VIDEO_FRAME_FLAG_NONE, GST_VIDEO_FORMAT_NV12, 1928,
                                       1208, 2, offsets, strides);
      }
      if (!in)
        break;
      EXPECT_EQ(gst_harness_push(h, in), GST_FLOW_OK) << "frame " << t;
      GstBuffer *out = gst_harness_pull(h);
      if (!out) {
        ADD_FAILURE() << "no output for frame " << t;
        break;
      }
      outs.push_back(Bytes(out));
      gst_buffer_unref(out);
    }
    gst_object_unref(allocator);
    return outs;
  };

  const std::vector<std::vector<uint8_t>> system = run(false);
  EXPECT_EQ(Drain(bus, GST_MESSAGE_ERROR), "");
  gst_harness_teardown(h);
  h = nullptr;
  gst_object_unref(bus);
  bus = nullptr;

  const std::vector<std::vector<uint8_t>> dmabuf = run(true);
  // One pass over the bus (popping one type discards the others posted before it).
  std::string errors, warnings;
  while (GstMessage *msg = gst_bus_pop(bus)) {
    GError *err = nullptr;
    if (GST_MESSAGE_TYPE(msg) == GST_MESSAGE_ERROR)
      gst_message_parse_error(msg, &err, nullptr);
    else if (GST_MESSAGE_TYPE(msg) == GST_MESSAGE_WARNING)
      gst_message_parse_warning(msg, &err, nullptr);
    if (err)
      (GST_MESSAGE_TYPE(msg) == GST_MESSAGE_ERROR ? errors : warnings) +=
          err->message + std::string("\n");
    g_clear_error(&err);
    gst_message_unref(msg);
  }
  EXPECT_EQ(errors, "");

  ASSERT_EQ(system.size(), frames.size());
  ASSERT_EQ(dmabuf.size(), frames.size());
  for (size_t t = 0; t < frames.size(); t++) {
    EXPECT_EQ(Diff(dmabuf[t], 0, system[t]), "") << "frame " << t;
    EXPECT_EQ(Diff(dmabuf[t], kFrameTensorBytes,
                   Expected(frames[t], l, TiciRoad(), ModelFrame::kMedmodel, {0.01, 0.02, -0.01})),
              "")
        << "frame " << t;
  }

  auto device = op::cl::Device::Open("auto");
  ASSERT_TRUE(device.ok()) << device.status().ToString();
  const bool can_import =
      gst_op_dmabuf_import_method((*device)->caps()) != GstOpDmabufImport::kNone;
  size_t fallback = 0;
  for (size_t at = warnings.find("DMABuf import not supported"); at != std::string::npos;
       at = warnings.find("DMABuf import not supported", at + 1))
    fallback++;
  EXPECT_EQ(fallback, can_import ? 0u : 1u) << warnings;
}

TEST_F(OpWarpTest, MalformedStringsAreRefusedAndQuoted) {
  Make("opwarp rpy=0,0.02,-0.01 intrinsics=500,500,320,240");
  for (const char *bad : {"0,0.02", "a,b,c", "0;0;0"}) {
    g_object_set(h->element, "rpy", bad, nullptr);
    const std::string warnings = Drain(bus, GST_MESSAGE_WARNING);
    EXPECT_NE(warnings.find(std::string("\"") + bad + "\""), std::string::npos) << warnings;
    gchar *rpy = nullptr;
    g_object_get(h->element, "rpy", &rpy, nullptr);
    EXPECT_STREQ(rpy, "0,0.02,-0.01") << "the previous calibration stays";
    g_free(rpy);
  }
  g_object_set(h->element, "intrinsics", "1,2,3", nullptr);
  EXPECT_NE(Drain(bus, GST_MESSAGE_WARNING).find("\"1,2,3\""), std::string::npos);
  gchar *k = nullptr;
  g_object_get(h->element, "intrinsics", &k, nullptr);
  EXPECT_STREQ(k, "500,500,320,240");
  g_free(k);
}

TEST_F(OpWarpTest, StringsRefusedBeforeThereIsABusAreReportedAtStart) {
  // gst-launch sets properties while parsing, before the element is in a pipeline.
  Make("opwarp rpy=0,0.02 intrinsics=1,x,3,4");
  gst_harness_set_src_caps_str(h, kTiciCaps);
  const std::string warnings = Drain(bus, GST_MESSAGE_WARNING);
  EXPECT_NE(warnings.find("\"0,0.02\""), std::string::npos) << warnings;
  EXPECT_NE(warnings.find("\"1,x,3,4\""), std::string::npos) << warnings;
}

// The context is made at NULL→READY (where the warp program starts building, beside the
// networks' loads): a device that does not exist fails that state change, with one error that
// names it (the later start must not post it again).
TEST_F(OpWarpTest, AMissingDeviceFailsReadyWithOneError) {
  GstElement *e = gst_element_factory_make("opwarp", nullptr);
  ASSERT_NE(e, nullptr);
  g_object_set(e, "device", "no-such-device", nullptr);
  bus = gst_bus_new();
  gst_element_set_bus(e, bus);
  // NULL → PAUSED in one call, as gst-launch-1.0 asks: READY fails, start never runs.
  EXPECT_EQ(gst_element_set_state(e, GST_STATE_PAUSED), GST_STATE_CHANGE_FAILURE);
  int count = 0;
  std::string all;
  while (GstMessage *msg = gst_bus_pop_filtered(bus, GST_MESSAGE_ERROR)) {
    GError *err = nullptr;
    gst_message_parse_error(msg, &err, nullptr);
    all += std::string(err->message) + "\n";
    count++;
    g_clear_error(&err);
    gst_message_unref(msg);
  }
  EXPECT_EQ(count, 1) << all;
  EXPECT_NE(all.find("no-such-device"), std::string::npos) << all;
  gst_element_set_state(e, GST_STATE_NULL);
  gst_object_unref(e);
}

TEST_F(OpWarpTest, UnknownFrameSizeNeedsIntrinsics) {
  Make("opwarp");
  gst_harness_set_src_caps_str(h, "video/x-raw,format=NV12,width=640,height=480,framerate=20/1");
  const Nv12Layout l = Nv12Layout::Tight(640, 480);
  EXPECT_EQ(gst_harness_push(h, Wrap(RandomBytes(l.MinBytes(), 3), 0)), GST_FLOW_NOT_NEGOTIATED);
  const std::string errors = Drain(bus, GST_MESSAGE_ERROR);
  EXPECT_NE(errors.find("640x480"), std::string::npos) << errors;
  EXPECT_NE(errors.find("intrinsics"), std::string::npos) << errors;
}

TEST_F(OpWarpTest, IntrinsicsMakeAnySizeWork) {
  Make("opwarp intrinsics=500,510,320.5,240 rpy=0.01,0.02,0.03");
  gst_harness_set_src_caps_str(h, "video/x-raw,format=NV12,width=640,height=480,framerate=20/1");
  const Nv12Layout l = Nv12Layout::Tight(640, 480);
  const std::vector<uint8_t> frame = RandomBytes(l.MinBytes(), 4);
  ASSERT_EQ(gst_harness_push(h, Wrap(frame, 0)), GST_FLOW_OK);
  GstBuffer *out = gst_harness_pull(h);
  ASSERT_NE(out, nullptr);
  EXPECT_EQ(
      Diff(Bytes(out), kFrameTensorBytes,
           Expected(frame, l, {500, 510, 320.5, 240}, ModelFrame::kMedmodel, {0.01, 0.02, 0.03})),
      "");
  gst_buffer_unref(out);
}

TEST_F(OpWarpTest, WideCameraAloneFeedsImg) {
  // With only the wide camera, img is made from it: wide intrinsics, medmodel frame.
  Make("opwarp model-input=img camera=wide device-type=tizi rpy=0,0.02,-0.01");
  gst_harness_set_src_caps_str(h, kTiciCaps);
  const Nv12Layout l = Nv12Layout::Tight(1928, 1208);
  const std::vector<uint8_t> frame = RandomBytes(l.MinBytes(), 15);
  ASSERT_EQ(gst_harness_push(h, Wrap(frame, 0)), GST_FLOW_OK);
  GstBuffer *out = gst_harness_pull(h);
  ASSERT_NE(out, nullptr);
  EXPECT_EQ(Diff(Bytes(out), kFrameTensorBytes,
                 Expected(frame, l, CameraIntrinsics(DeviceType::kTizi, CameraRole::kWide),
                          ModelFrame::kMedmodel, {0, 0.02, -0.01})),
            "");
  gst_buffer_unref(out);
}

TEST_F(OpWarpTest, WrongPresetForTheFrameSizeFailsNegotiation) {
  Make("opwarp device-type=mici");
  gst_harness_set_src_caps_str(h, kTiciCaps);
  const Nv12Layout l = Nv12Layout::Tight(1928, 1208);
  EXPECT_EQ(gst_harness_push(h, Wrap(RandomBytes(l.MinBytes(), 5), 0)), GST_FLOW_NOT_NEGOTIATED);
  const std::string errors = Drain(bus, GST_MESSAGE_ERROR);
  EXPECT_NE(errors.find("intrinsics"), std::string::npos) << errors;
}

TEST_F(OpWarpTest, TruncatedFrameIsAStreamError) {
  Make("opwarp");
  gst_harness_set_src_caps_str(h, kTiciCaps);
  const Nv12Layout l = Nv12Layout::Tight(1928, 1208);
  EXPECT_EQ(gst_harness_push(h, Wrap(RandomBytes(l.MinBytes() - 100, 6), 0)), GST_FLOW_ERROR);
  const std::string errors = Drain(bus, GST_MESSAGE_ERROR);
  EXPECT_NE(errors.find("smaller than its caps"), std::string::npos) << errors;
}

TEST_F(OpWarpTest, CalibrationEventAndLiveRpy) {
  Make("opwarp");
  gst_harness_set_src_caps_str(h, kTiciCaps);
  const Nv12Layout l = Nv12Layout::Tight(1928, 1208);
  auto push_and_check = [&](uint32_t seed, const Rpy &rpy, bool seen) {
    const std::vector<uint8_t> frame = RandomBytes(l.MinBytes(), seed);
    ASSERT_EQ(gst_harness_push(h, Wrap(frame, 0)), GST_FLOW_OK);
    GstBuffer *out = gst_harness_pull(h);
    ASSERT_NE(out, nullptr);
    GstOpFrameMeta *meta = gst_buffer_get_op_frame_meta(out);
    ASSERT_NE(meta, nullptr);
    EXPECT_EQ(bool(meta->calibration_seen), seen);
    EXPECT_EQ(Diff(Bytes(out), kFrameTensorBytes,
                   Expected(frame, l, TiciRoad(), ModelFrame::kMedmodel, rpy)),
              "")
        << "rpy " << FormatRpy(rpy);
    gst_buffer_unref(out);
  };
  // No calibration yet: zeros, and the meta says so.
  push_and_check(10, {}, false);
  // The documented event: a serialized custom downstream event "op-calibration".
  GstEvent *ev = gst_event_new_custom(
      GST_EVENT_CUSTOM_DOWNSTREAM,
      gst_structure_new("op-calibration", "roll", G_TYPE_DOUBLE, 0.0, "pitch", G_TYPE_DOUBLE, 0.02,
                        "yaw", G_TYPE_DOUBLE, -0.01, nullptr));
  ASSERT_TRUE(gst_harness_push_event(h, ev));
  push_and_check(11, {0, 0.02, -0.01}, true);
  gchar *rpy = nullptr;
  g_object_get(h->element, "rpy", &rpy, nullptr);
  auto parsed = ParseRpy(rpy ? rpy : "");
  g_free(rpy);
  ASSERT_TRUE(parsed.ok());
  EXPECT_EQ(parsed->pitch, 0.02);
  // The event goes on downstream (opvision and replays may want it too).
  bool forwarded = false;
  while (GstEvent *e = gst_harness_try_pull_event(h)) {
    forwarded |= gst_event_has_name(e, "op-calibration");
    gst_event_unref(e);
  }
  EXPECT_TRUE(forwarded);
  // The property, changed while playing, applies from the next frame.
  g_object_set(h->element, "rpy", "0.03,-0.01,0.02", nullptr);
  push_and_check(12, {0.03, -0.01, 0.02}, true);
  // An event with missing fields is refused with a warning; the calibration stays.
  ASSERT_TRUE(gst_harness_push_event(
      h, gst_event_new_custom(
             GST_EVENT_CUSTOM_DOWNSTREAM,
             gst_structure_new("op-calibration", "roll", G_TYPE_DOUBLE, 1.0, nullptr))));
  EXPECT_NE(Drain(bus, GST_MESSAGE_WARNING).find("calibration"), std::string::npos);
  push_and_check(13, {0.03, -0.01, 0.02}, true);
}

TEST_F(OpWarpTest, LatencyAddsTheMeasuredProcessingTime) {
  Make("opwarp");
  gst_harness_set_upstream_latency(h, 10 * GST_MSECOND);
  gst_harness_set_src_caps_str(h, kTiciCaps);
  EXPECT_EQ(gst_harness_query_latency(h), 10 * GST_MSECOND) << "nothing measured yet";
  const Nv12Layout l = Nv12Layout::Tight(1928, 1208);
  ASSERT_EQ(gst_harness_push(h, Wrap(RandomBytes(l.MinBytes(), 9), 0)), GST_FLOW_OK);
  GstBuffer *out = gst_harness_pull(h);
  ASSERT_NE(out, nullptr);
  gst_buffer_unref(out);
  // The first frame takes more than a millisecond (upload, warp, copies), so it is announced.
  GstMessage *msg = gst_bus_timed_pop_filtered(bus, 10 * GST_SECOND, GST_MESSAGE_LATENCY);
  ASSERT_NE(msg, nullptr);
  gst_message_unref(msg);
  const GstClockTime total = gst_harness_query_latency(h);
  EXPECT_GT(total, 10 * GST_MSECOND + GST_MSECOND);
  EXPECT_LT(total, 10 * GST_MSECOND + 10 * GST_SECOND);
}

TEST_F(OpWarpTest, LatencyOfADeviceOutputIsMeasuredAtItsCompletion) {
  // OpenCL output: nothing waits on the host, the frame's completion announces the latency.
  auto ctx = gst_op_context_new("auto");
  ASSERT_TRUE(ctx.ok()) << ctx.status().ToString();
  GstContext *context = gst_context_new_op_context(*ctx);
  Make("opwarp", context);
  gst_context_unref(context);
  gst_harness_set_upstream_latency(h, 10 * GST_MSECOND);
  gst_harness_set_src_caps_str(h, kTiciCaps);
  gst_harness_set_sink_caps_str(h, "application/x-op-tensors(memory:OpCLMemory)");
  const Nv12Layout l = Nv12Layout::Tight(1928, 1208);
  ASSERT_EQ(gst_harness_push(h, Wrap(RandomBytes(l.MinBytes(), 10), 0)), GST_FLOW_OK);
  GstBuffer *out = gst_harness_pull(h);
  ASSERT_NE(out, nullptr);
  ASSERT_TRUE(gst_is_op_memory(gst_buffer_peek_memory(out, 0)));
  Bytes(out);  // waits for the warp
  gst_buffer_unref(out);
  GstMessage *msg = gst_bus_timed_pop_filtered(bus, 10 * GST_SECOND, GST_MESSAGE_LATENCY);
  ASSERT_NE(msg, nullptr) << "no LATENCY message from the completion";
  gst_message_unref(msg);
  const GstClockTime total = gst_harness_query_latency(h);
  EXPECT_GT(total, 10 * GST_MSECOND);
  EXPECT_LT(total, 10 * GST_MSECOND + 10 * GST_SECOND);
  gst_object_unref(*ctx);
}

TEST_F(OpWarpTest, GstLaunchPipelineWritesTwelvePlanesPerFrame) {
  // filesrc ! rawvideoparse ! opwarp ! filesink, the line docs/elements/opwarp.md gives.
  std::string why;
  if (!LoadSystemPlugins(
          {{"coreelements", "libgstcoreelements.so"}, {"rawparse", "libgstrawparse.so"}}, &why))
    GTEST_SKIP() << why << " (unavailable)";
  const Nv12Layout l = Nv12Layout::Tight(1928, 1208);
  const std::string dir = g_get_tmp_dir();
  const std::string in = dir + "/opwarp-test-" + std::to_string(getpid()) + ".nv12";
  const std::string out = dir + "/opwarp-test-" + std::to_string(getpid()) + ".bin";
  std::vector<std::vector<uint8_t>> frames;
  {
    std::ofstream f(in, std::ios::binary);
    for (int t = 0; t < 6; t++) {
      frames.push_back(RandomBytes(l.MinBytes(), 500 + t));
      f.write(reinterpret_cast<const char *>(frames.back().data()), frames.back().size());
    }
  }
  const std::string launch = "filesrc location=" + in +
                             " ! rawvideoparse format=nv12 width=1928 height=1208 framerate=20/1"
                             " ! opwarp rpy=\"0,0.02,-0.01\" ! filesink location=" +
                             out;
  GError *err = nullptr;
  GstElement *pipeline = gst_parse_launch(launch.c_str(), &err);
  ASSERT_NE(pipeline, nullptr) << (err ? err->message : "");
  ASSERT_NE(gst_element_set_state(pipeline, GST_STATE_PLAYING), GST_STATE_CHANGE_FAILURE);
  GstBus *pbus = gst_element_get_bus(pipeline);
  GstMessage *msg = gst_bus_timed_pop_filtered(pbus, 60 * GST_SECOND,
                                               GstMessageType(GST_MESSAGE_EOS | GST_MESSAGE_ERROR));
  ASSERT_NE(msg, nullptr) << "timeout";
  EXPECT_EQ(GST_MESSAGE_TYPE(msg), GST_MESSAGE_EOS);
  gst_message_unref(msg);
  gst_object_unref(pbus);
  gst_element_set_state(pipeline, GST_STATE_NULL);
  gst_object_unref(pipeline);

  std::ifstream f(out, std::ios::binary);
  std::vector<uint8_t> got((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  ASSERT_EQ(got.size(), frames.size() * 12 * 128 * 256);
  for (size_t t = 0; t < frames.size(); t++) {
    const std::vector<uint8_t> want =
        Expected(frames[t], l, TiciRoad(), ModelFrame::kMedmodel, {0, 0.02, -0.01});
    EXPECT_EQ(Diff(got, t * kModelInputBytes + kFrameTensorBytes, want), "") << "frame " << t;
    if (t >= 4) {
      const std::vector<uint8_t> old =
          Expected(frames[t - 4], l, TiciRoad(), ModelFrame::kMedmodel, {0, 0.02, -0.01});
      EXPECT_EQ(Diff(got, t * kModelInputBytes, old), "") << "frame " << t << " (t-4)";
    }
  }
  std::remove(in.c_str());
  std::remove(out.c_str());
}
