// The vendor memory paths of opclupload on the machine's OpenCL device (PoCL in CI): DMABuf
// input (memfd-backed dmabuf memories, camera-style and tight NV12) uploaded bit-exactly with one
// fallback warning where the device cannot import, the choice of import method from the
// capability record, and the discrete-GPU staging path forced on (bit-exact, buffers reused).
#include <gtest/gtest.h>

#include <gst/allocators/gstdmabuf.h>
#include <gst/base/gstbasetransform.h>
#include <gst/check/gstharness.h>
#include <gst/gst.h>
#include <gst/video/video.h>

#include <sys/mman.h>
#include <unistd.h>

#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "op/gstop.h"

namespace {

class OpClDmabuf : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { gst_init(nullptr, nullptr); }
};

constexpr int kW = 1928, kH = 1208;
const char *kDmabufCaps =
    "video/x-raw(memory:DMABuf),format=NV12,width=1928,height=1208,framerate=20/1";
const char *kNv12Caps = "video/x-raw,format=NV12,width=1928,height=1208,framerate=20/1";

std::vector<guint8> Random(size_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::vector<guint8> v(n);
  for (auto &b : v)
    b = static_cast<guint8>(rng());
  return v;
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

GstVideoInfo Layout(bool camera) {
  GstVideoInfo info;
  gst_video_info_set_format(&info, GST_VIDEO_FORMAT_NV12, kW, kH);
  if (camera)
    gst_op_video_info_set_camera_layout(&info);
  return info;
}

// A frame in a memfd wrapped as a dmabuf memory, like a camera buffer, with its GstVideoMeta.
GstBuffer *DmabufFrame(GstAllocator *dmabuf, const GstVideoInfo &layout,
                       const std::vector<guint8> &bytes, bool with_meta = true) {
  int fd = memfd_create("op-test-frame", MFD_CLOEXEC);
  if (fd < 0) {
    ADD_FAILURE() << "memfd_create: " << g_strerror(errno);
    return nullptr;
  }
  if (ftruncate(fd, bytes.size()) != 0 ||
      pwrite(fd, bytes.data(), bytes.size(), 0) != static_cast<ssize_t>(bytes.size())) {
    ADD_FAILURE() << "writing the memfd: " << g_strerror(errno);
    close(fd);
    return nullptr;
  }
  GstBuffer *buf = gst_buffer_new();
  gst_buffer_append_memory(buf, gst_dmabuf_allocator_alloc(dmabuf, fd, bytes.size()));
  if (with_meta) {
    GstVideoInfo l = layout;
    gst_buffer_add_video_meta_full(buf, GST_VIDEO_FRAME_FLAG_NONE, GST_VIDEO_FORMAT_NV12, kW, kH, 2,
                                   l.offset, l.stride);
  }
  return buf;
}

GstStructure *Stats(GstElement *upload) {
  GstStructure *stats = nullptr;
  g_object_get(upload, "stats", &stats, nullptr);
  return stats;
}

guint64 Stat64(GstElement *upload, const char *field) {
  GstStructure *s = Stats(upload);
  guint64 v = G_MAXUINT64;
  if (!s || !gst_structure_get_uint64(s, field, &v))
    ADD_FAILURE() << "no stats field " << field;
  if (s)
    gst_structure_free(s);
  return v;
}

guint Stat(GstElement *upload, const char *field) {
  GstStructure *s = Stats(upload);
  guint v = G_MAXUINT;
  if (!s || !gst_structure_get_uint(s, field, &v))
    ADD_FAILURE() << "no stats field " << field;
  if (s)
    gst_structure_free(s);
  return v;
}

// Warnings on `bus` whose message contains `text`.
int CountWarnings(GstBus *bus, const char *text) {
  int n = 0;
  while (GstMessage *msg = gst_bus_pop_filtered(bus, GST_MESSAGE_WARNING)) {
    GError *err = nullptr;
    gst_message_parse_warning(msg, &err, nullptr);
    if (std::string(err->message).find(text) != std::string::npos)
      n++;
    g_error_free(err);
    gst_message_unref(msg);
  }
  return n;
}

// ---- the import method -------------------------------------------------------------------

TEST(DmabufImportMethod, ChosenFromTheCapabilityRecord) {
  op::cl::Capabilities caps;
  EXPECT_EQ(gst_op_dmabuf_import_method(caps), GstOpDmabufImport::kNone);
  caps.qcom_dmabuf = true;
  EXPECT_EQ(gst_op_dmabuf_import_method(caps), GstOpDmabufImport::kQcom);
  caps = {};
  caps.khr_dmabuf = true;
  EXPECT_EQ(gst_op_dmabuf_import_method(caps), GstOpDmabufImport::kKhr);
  caps = {};
  caps.arm_import = true;
  EXPECT_EQ(gst_op_dmabuf_import_method(caps), GstOpDmabufImport::kArm);
  // Preference when several are present: Qualcomm, then Khronos, then Arm.
  caps.khr_dmabuf = true;
  EXPECT_EQ(gst_op_dmabuf_import_method(caps), GstOpDmabufImport::kKhr);
  caps.qcom_dmabuf = true;
  EXPECT_EQ(gst_op_dmabuf_import_method(caps), GstOpDmabufImport::kQcom);
  EXPECT_STREQ(gst_op_dmabuf_import_method_name(GstOpDmabufImport::kArm), "cl_arm_import_memory");
}

TEST_F(OpClDmabuf, ImportWithAMethodTheDeviceLacksFailsWithAStatus) {
  auto device = op::cl::Device::Open("auto");
  ASSERT_TRUE(device.ok()) << device.status().ToString();
  if ((*device)->caps().arm_import)
    GTEST_SKIP() << "the device has cl_arm_import_memory";
  int fd = memfd_create("op-test-import", MFD_CLOEXEC);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(ftruncate(fd, 4096), 0);
  auto none = gst_op_dmabuf_import(**device, GstOpDmabufImport::kNone, fd, 4096, nullptr);
  EXPECT_FALSE(none.ok());
  auto arm = gst_op_dmabuf_import(**device, GstOpDmabufImport::kArm, fd, 4096, nullptr);
  EXPECT_FALSE(arm.ok());
  EXPECT_NE(arm.status().message().find("clImportMemoryARM"), std::string::npos)
      << arm.status().ToString();
  close(fd);
}

// What an imported frame becomes (the import itself needs hardware with the extensions): a
// GstOpMemory over a cl_mem it does not own, showing the input's region, keeping the input alive.
TEST_F(OpClDmabuf, WrappedBufferShowsItsRegionAndKeepsTheInputAlive) {
  auto ctx = gst_op_context_new("auto");
  ASSERT_TRUE(ctx.ok()) << ctx.status().ToString();
  const auto &device = gst_op_context_get_device(*ctx);
  auto bytes = Random(8192, 11);
  auto mem = device->CreateBuffer(bytes.size());
  ASSERT_TRUE(mem.ok()) << mem.status().ToString();
  auto written = gst_op_context_get_queue(*ctx).Write(mem->get(), 0, bytes.size(), bytes.data());
  ASSERT_TRUE(written.ok());
  ASSERT_TRUE(op::cl::WaitForEvent(written->get()).ok());

  GstBuffer *input = gst_buffer_new();
  bool input_freed = false;
  gst_mini_object_weak_ref(
      GST_MINI_OBJECT_CAST(input),
      [](gpointer data, GstMiniObject *) { *static_cast<bool *>(data) = true; }, &input_freed);
  GstAllocator *allocator = gst_op_allocator_new(*ctx);
  GstMemory *wrapped = gst_op_allocator_wrap(allocator, *mem, bytes.size(), 4096, 1024,
                                             GST_MINI_OBJECT_CAST(gst_buffer_ref(input)));
  ASSERT_NE(wrapped, nullptr);
  gst_buffer_unref(input);
  EXPECT_FALSE(input_freed) << "the wrapper must keep the input alive";

  GstMapInfo cl;
  ASSERT_TRUE(gst_op_memory_map_cl(wrapped, &cl, GST_MAP_READ));
  EXPECT_EQ(gst_op_map_info_get_cl_mem(&cl), mem->get());
  gst_memory_unmap(wrapped, &cl);
  GstMapInfo host;
  ASSERT_TRUE(gst_memory_map(wrapped, &host, GST_MAP_READ));
  ASSERT_EQ(host.size, 1024u);
  EXPECT_EQ(std::memcmp(host.data, bytes.data() + 4096, 1024), 0);
  gst_memory_unmap(wrapped, &host);

  GstMemory *view = gst_memory_share(wrapped, 0, 16);
  gst_memory_unref(wrapped);
  EXPECT_FALSE(input_freed) << "a shared view still aliases the input";
  gst_memory_unref(view);
  EXPECT_TRUE(input_freed);
  gst_object_unref(allocator);
  gst_object_unref(*ctx);
}

// ---- caps ----------------------------------------------------------------------------------

TEST_F(OpClDmabuf, SinkOffersDmabufAfterOpenClAndSystemMemory) {
  GstElement *e = gst_element_factory_make("opclupload", nullptr);
  ASSERT_NE(e, nullptr);
  GstCaps *out = gst_caps_from_string("video/x-raw(memory:OpCLMemory),format=NV12");
  GstCaps *in = GST_BASE_TRANSFORM_GET_CLASS(e)->transform_caps(GST_BASE_TRANSFORM(e), GST_PAD_SRC,
                                                                out, nullptr);
  ASSERT_EQ(gst_caps_get_size(in), 3u) << gst_caps_to_string(in);
  const char *want[] = {GST_CAPS_FEATURE_MEMORY_OP_CL, GST_CAPS_FEATURE_MEMORY_SYSTEM_MEMORY,
                        GST_OP_CAPS_FEATURE_MEMORY_DMABUF};
  for (guint i = 0; i < 3; i++)
    EXPECT_TRUE(gst_caps_features_contains(gst_caps_get_features(in, i), want[i]))
        << i << ": " << gst_caps_to_string(in);
  // The sink template says the same.
  GstPad *sink = gst_element_get_static_pad(e, "sink");
  GstCaps *templ = gst_pad_get_pad_template_caps(sink);
  GstCaps *dmabuf = gst_caps_from_string(kDmabufCaps);
  EXPECT_TRUE(gst_caps_can_intersect(templ, dmabuf)) << gst_caps_to_string(templ);
  gst_caps_unref(dmabuf);
  gst_caps_unref(templ);
  gst_object_unref(sink);
  gst_caps_unref(in);
  gst_caps_unref(out);
  gst_object_unref(e);
}

// ---- DMABuf input ----------------------------------------------------------------------------

// Four frames of DMABuf input through opclupload ! opcldownload: the bytes come back exactly,
// and a device without an import extension says so once.
void RoundTrip(bool camera) {
  auto ctx = gst_op_context_new("auto");
  ASSERT_TRUE(ctx.ok()) << ctx.status().ToString();
  GstOpDmabufImport method = gst_op_dmabuf_import_method(gst_op_context_get_device(*ctx)->caps());
  gst_object_unref(*ctx);
  if (method != GstOpDmabufImport::kNone)
    GTEST_SKIP() << "the device imports with " << gst_op_dmabuf_import_method_name(method)
                 << "; this test covers the fallback";

  GstVideoInfo layout = Layout(camera);
  if (camera) {
    ASSERT_EQ(layout.stride[0], 2048);
    ASSERT_EQ(layout.offset[1], 2490368u);
  }
  GstAllocator *dmabuf = gst_dmabuf_allocator_new();
  GstHarness *h = gst_harness_new_parse("opclupload name=u ! opcldownload");
  GstBus *bus = gst_bus_new();
  gst_element_set_bus(h->element, bus);
  gst_harness_add_propose_allocation_meta(h, GST_VIDEO_META_API_TYPE, nullptr);
  gst_harness_set_src_caps_str(h, kDmabufCaps);
  GstElement *upload = gst_bin_get_by_name(GST_BIN(h->element), "u");
  for (unsigned i = 1; i <= 4; i++) {
    // New caps before the last frame: the warning is once per run, not once per caps.
    if (i == 4)
      gst_harness_set_src_caps_str(
          h, "video/x-raw(memory:DMABuf),format=NV12,width=1928,height=1208,framerate=10/1");
    auto bytes = Random(layout.size, i);
    GstBuffer *in = DmabufFrame(dmabuf, layout, bytes);
    ASSERT_NE(in, nullptr);
    ASSERT_TRUE(gst_is_dmabuf_memory(gst_buffer_peek_memory(in, 0)));
    GST_BUFFER_PTS(in) = i * 50 * GST_MSECOND;
    ASSERT_EQ(gst_harness_push(h, in), GST_FLOW_OK);
    GstBuffer *out = gst_harness_pull(h);
    ASSERT_NE(out, nullptr);
    EXPECT_EQ(GST_BUFFER_PTS(out), i * 50 * GST_MSECOND);
    GstVideoMeta *meta = gst_buffer_get_video_meta(out);
    ASSERT_NE(meta, nullptr);
    EXPECT_EQ(meta->stride[0], layout.stride[0]);
    EXPECT_EQ(meta->offset[1], layout.offset[1]);
    EXPECT_TRUE(Bytes(out) == bytes) << "frame " << i << " differs";
    gst_buffer_unref(out);
  }
  // The input was negotiated as DMABuf, not converted on the way.
  GstPad *sink = gst_element_get_static_pad(upload, "sink");
  GstCaps *caps = gst_pad_get_current_caps(sink);
  ASSERT_NE(caps, nullptr);
  EXPECT_TRUE(gst_op_caps_is_dmabuf(caps)) << gst_caps_to_string(caps);
  gst_caps_unref(caps);
  gst_object_unref(sink);

  EXPECT_EQ(CountWarnings(bus, "DMABuf import not supported by"), 1);
  EXPECT_EQ(Stat(upload, "fallback-warnings"), 1u);
  EXPECT_EQ(Stat64(upload, "uploads"), 4u);
  EXPECT_EQ(Stat64(upload, "imported-frames"), 0u);
  gst_object_unref(upload);
  gst_element_set_bus(h->element, nullptr);
  gst_object_unref(bus);
  gst_harness_teardown(h);
  gst_object_unref(dmabuf);
}

TEST_F(OpClDmabuf, CameraStridedDmabufIsBitExactWithOneWarning) {
  RoundTrip(true);
}

TEST_F(OpClDmabuf, TightDmabufIsBitExactWithOneWarning) {
  RoundTrip(false);
}

TEST_F(OpClDmabuf, DmabufWithoutVideoMetaIsAnError) {
  GstAllocator *dmabuf = gst_dmabuf_allocator_new();
  GstHarness *h = gst_harness_new_parse("opclupload ! opcldownload");
  GstBus *bus = gst_bus_new();
  gst_element_set_bus(h->element, bus);
  gst_harness_set_src_caps_str(h, kDmabufCaps);
  GstVideoInfo layout = Layout(false);
  GstBuffer *in = DmabufFrame(dmabuf, layout, Random(layout.size, 5), false);
  ASSERT_NE(in, nullptr);
  EXPECT_EQ(gst_harness_push(h, in), GST_FLOW_ERROR);
  GstMessage *msg = gst_bus_pop_filtered(bus, GST_MESSAGE_ERROR);
  ASSERT_NE(msg, nullptr);
  GError *err = nullptr;
  gst_message_parse_error(msg, &err, nullptr);
  EXPECT_NE(std::string(err->message).find("GstVideoMeta"), std::string::npos) << err->message;
  g_error_free(err);
  gst_message_unref(msg);
  gst_element_set_bus(h->element, nullptr);
  gst_object_unref(bus);
  gst_harness_teardown(h);
  gst_object_unref(dmabuf);
}

// ---- staging -------------------------------------------------------------------------------

TEST_F(OpClDmabuf, StagingIsBitExactAndReusesItsBuffers) {
  GstVideoInfo camera = Layout(true);
  GstHarness *h = gst_harness_new_parse("opclupload name=u force-staging=true ! opcldownload");
  gst_harness_add_propose_allocation_meta(h, GST_VIDEO_META_API_TYPE, nullptr);
  gst_harness_set_src_caps_str(h, kNv12Caps);
  GstElement *upload = gst_bin_get_by_name(GST_BIN(h->element), "u");
  const unsigned frames = 24;
  for (unsigned i = 1; i <= frames; i++) {
    auto bytes = Random(camera.size, 100 + i);
    GstBuffer *in = gst_buffer_new_memdup(bytes.data(), bytes.size());
    gst_buffer_add_video_meta_full(in, GST_VIDEO_FRAME_FLAG_NONE, GST_VIDEO_FORMAT_NV12, kW, kH, 2,
                                   camera.offset, camera.stride);
    ASSERT_EQ(gst_harness_push(h, in), GST_FLOW_OK);
    GstBuffer *out = gst_harness_pull(h);
    ASSERT_NE(out, nullptr);
    EXPECT_TRUE(Bytes(out) == bytes) << "frame " << i << " differs";
    gst_buffer_unref(out);
    if (i == 1) {
      EXPECT_EQ(Stat(upload, "staging-buffers"), GstOpUploader::kStagingSlots);
    }
  }
  // Made once for the caps, reused for every frame.
  EXPECT_EQ(Stat(upload, "staging-buffers"), GstOpUploader::kStagingSlots);
  EXPECT_EQ(Stat64(upload, "staged-uploads"), frames);
  EXPECT_EQ(Stat64(upload, "uploads"), frames);
  gst_object_unref(upload);
  gst_harness_teardown(h);
}

TEST_F(OpClDmabuf, StagedTensorsRoundTrip) {
  const char *caps =
      "application/x-op-tensors, names=(string)<\"a\", \"b\">, types=(string)<\"float32\", "
      "\"uint8\">, dims=(string)<\"1,3,13\", \"127\">";
  GstHarness *h = gst_harness_new_parse("opclupload name=u force-staging=true ! opcldownload");
  gst_harness_set_src_caps_str(h, caps);
  GstElement *upload = gst_bin_get_by_name(GST_BIN(h->element), "u");
  for (unsigned i = 0; i < 5; i++) {
    auto blob = Random(3 * 13 * 4 + 127, 7 + i);
    ASSERT_EQ(gst_harness_push(h, gst_buffer_new_memdup(blob.data(), blob.size())), GST_FLOW_OK);
    GstBuffer *out = gst_harness_pull(h);
    ASSERT_NE(out, nullptr);
    EXPECT_TRUE(Bytes(out) == blob) << "set " << i;
    gst_buffer_unref(out);
  }
  EXPECT_EQ(Stat64(upload, "staged-uploads"), 5u);
  EXPECT_EQ(Stat(upload, "staging-buffers"), GstOpUploader::kStagingSlots);
  gst_object_unref(upload);
  gst_harness_teardown(h);
}

TEST_F(OpClDmabuf, UnifiedMemoryUploadsDirectlyUnlessForced) {
  auto ctx = gst_op_context_new("auto");
  ASSERT_TRUE(ctx.ok()) << ctx.status().ToString();
  bool policy = gst_op_context_get_device(*ctx)->buffer_policy().staging_uploads;
  gst_object_unref(*ctx);
  if (policy)
    GTEST_SKIP() << "the device stages every upload (discrete memory)";
  GstHarness *h = gst_harness_new_parse("opclupload name=u ! opcldownload");
  gst_harness_set_src_caps_str(h, kNv12Caps);
  GstElement *upload = gst_bin_get_by_name(GST_BIN(h->element), "u");
  GstVideoInfo packed = Layout(false);
  auto bytes = Random(packed.size, 3);
  ASSERT_EQ(gst_harness_push(h, gst_buffer_new_memdup(bytes.data(), bytes.size())), GST_FLOW_OK);
  GstBuffer *out = gst_harness_pull(h);
  ASSERT_NE(out, nullptr);
  EXPECT_TRUE(Bytes(out) == bytes);
  gst_buffer_unref(out);
  EXPECT_EQ(Stat64(upload, "uploads"), 1u);
  EXPECT_EQ(Stat64(upload, "staged-uploads"), 0u);
  EXPECT_EQ(Stat(upload, "staging-buffers"), 0u);
  gst_object_unref(upload);
  gst_harness_teardown(h);
}

}  // namespace
