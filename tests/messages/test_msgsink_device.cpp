// opmsgsink on tensors in OpenCL memory (memory:OpCLMemory caps, GstOpMemory buffers): the
// sink maps them like system memory and must produce the same bytes as for the same floats in
// system memory. Skips (77) without an OpenCL device; PoCL counts as one.
#include <gtest/gtest.h>

#include <cstdio>

#include "cl/device.h"
#include "msgsink_fixture.h"
#include "op/gstopcontext.h"
#include "op/gstopmemory.h"

namespace {

using namespace msgtest;

GstOpContext *g_context = nullptr;

// The frame's tensors copied into GstOpMemory on the test's context, with the timestamps and
// frame meta of the system-memory buffer MakeBuffer() makes for the same frame.
GstBuffer *MakeDeviceBuffer(const Layout &l, const std::vector<float> &raw, const FrameSpec &spec) {
  GstAllocator *allocator = gst_op_allocator_new(g_context);
  GstBuffer *buffer = gst_buffer_new();
  for (int t = 0; t < 2; t++) {
    size_t offset = t == 0 ? 0 : l.vision, n = t == 0 ? l.vision : l.policy;
    op::Status status;
    GstMemory *mem = gst_op_allocator_alloc(allocator, n * sizeof(float), &status);
    EXPECT_NE(mem, nullptr) << status.ToString();
    GstMapInfo map;
    EXPECT_TRUE(gst_memory_map(mem, &map, GST_MAP_WRITE));
    std::memcpy(map.data, raw.data() + offset, n * sizeof(float));
    gst_memory_unmap(mem, &map);
    gst_buffer_append_memory(buffer, mem);
  }
  gst_object_unref(allocator);
  GstBuffer *system = MakeBuffer(l, raw, spec);
  gst_buffer_copy_into(buffer, system, GST_BUFFER_COPY_METADATA, 0, -1);
  gst_buffer_unref(system);
  return buffer;
}

TEST(MsgSinkDevice, OpenClMemoryGivesTheSameMessages) {
  Layout l = MakeLayout();
  std::vector<std::vector<uint8_t>> runs[2];
  for (int device = 0; device < 2; device++) {
    Sink sink;
    sink.Set("emit-signals", "true");
    sink.Set("timestamps", "stream");
    sink.Start(l, /*cl_memory=*/device == 1);
    for (uint32_t f = 0; f < 3; f++) {
      FrameSpec spec;
      spec.frame_id = f;
      spec.pts = f * GST_SECOND;
      std::vector<float> raw = RawFrame(l, int(f));
      GstBuffer *buffer = device ? MakeDeviceBuffer(l, raw, spec) : MakeBuffer(l, raw, spec);
      if (device) {
        ASSERT_TRUE(gst_is_op_memory(gst_buffer_peek_memory(buffer, 0)));
      }
      ASSERT_EQ(sink.Push(buffer), GST_FLOW_OK) << sink.Error();
    }
    runs[device] = sink.received.bytes;
  }
  ASSERT_EQ(runs[0].size(), 9u);
  EXPECT_EQ(runs[0], runs[1]);
}

}  // namespace

int main(int argc, char **argv) {
  if (!InitWithLinkedSink(&argc, &argv))
    return 1;
  auto devices = op::cl::ListDevices();
  if (!devices.ok()) {
    std::fprintf(stderr, "SKIP: no OpenCL device: %s\n", devices.status().message().c_str());
    return 77;
  }
  auto context = gst_op_context_new("auto");
  if (!context.ok()) {
    std::fprintf(stderr, "SKIP: no OpenCL context: %s\n", context.status().ToString().c_str());
    return 77;
  }
  g_context = *context;
  ::testing::InitGoogleTest(&argc, argv);
  int rc = RUN_ALL_TESTS();
  gst_object_unref(g_context);
  return rc;
}
