// Writes the log of the message golden test with opmsgsink itself: four buffers of a fixed
// raw-output tensor (plan 4955 and lead 102 wide, slices in a fixed non-trivial order, frame
// provenance in GstOpFrameMeta) pushed through a GstHarness, `timestamps=stream` so the bytes
// repeat. The third buffer follows a drop and must produce nothing: the log holds 9 messages.
//
//   write-fixed-log OUT [--kill]
// OUT ending in .zst gets one zstd stream. --kill exits like a killed process after the last
// buffer (the sink has flushed every frame but never ends the zstd stream).
#include <gst/check/gstharness.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "gstopmsgsink.h"
#include "op/gstoptensor.h"

int main(int argc, char **argv) {
  // No registry: only the opmsgsink linked in here exists (see msgsink_fixture.h).
  g_setenv("GST_REGISTRY_DISABLE", "yes", TRUE);
  gst_init(&argc, &argv);
  if (argc < 2) {
    std::fprintf(stderr, "usage: write-fixed-log OUT [--kill]\n");
    return 1;
  }
  const bool kill = argc > 2 && std::strcmp(argv[2], "--kill") == 0;
  if (!gst_element_register(nullptr, "opmsgsink", GST_RANK_NONE, GST_TYPE_OP_MSG_SINK))
    return 1;

  const std::pair<const char *, int64_t> layout[] = {
      {"hidden_state", 512},         {"lead", 102},          {"pose", 12},        {"plan", 4955},
      {"lane_lines", 528},           {"lane_lines_prob", 8}, {"road_edges", 264}, {"lead_prob", 3},
      {"desire_state", 8},           {"desire_pred", 32},    {"meta", 55},        {"pad", 3},
      {"wide_from_device_euler", 6}, {"road_transform", 12},
  };
  GstOpTensorInfo info;
  int64_t size = 0;
  for (const auto &[name, width] : layout) {
    info.slices.push_back({"outputs", name, size, size + width});
    size += width;
  }
  info.tensors.push_back({"outputs", GstOpTensorType::kFloat32, {1, size}});

  GstElement *sink = gst_element_factory_make("opmsgsink", nullptr);
  g_object_set(sink, "location", argv[1], "v-ego", 8.0f, "lat-delay", 0.15f, "long-delay", 0.3f,
               nullptr);
  gst_util_set_object_arg(G_OBJECT(sink), "timestamps", "stream");
  GstHarness *h = gst_harness_new_empty();
  static GstStaticPadTemplate src =
      GST_STATIC_PAD_TEMPLATE("src", GST_PAD_SRC, GST_PAD_ALWAYS, GST_STATIC_CAPS_ANY);
  gst_harness_add_element_full(h, sink, &src, "sink", nullptr, nullptr);
  gst_harness_set_src_caps(h, gst_op_tensor_info_to_caps(info));
  gst_harness_play(h);

  for (uint32_t f = 0; f < 4; f++) {
    // Smooth, bounded values that differ from frame to frame.
    std::vector<float> raw(size);
    for (int64_t i = 0; i < size; i++)
      raw[i] = static_cast<float>(2.0 * std::sin(0.37 * static_cast<double>(i) + 0.9 * f));
    GstBuffer *buffer = gst_buffer_new_memdup(raw.data(), raw.size() * sizeof(float));
    GST_BUFFER_PTS(buffer) = 2 * GST_SECOND + 50 * GST_MSECOND * f;
    GstOpFrameMeta *meta = gst_buffer_add_op_frame_meta(buffer);
    meta->road_frame_id = 39 + f;
    meta->wide_frame_id = 38 + f;
    meta->road_eof_ns = 1000000000ull + 50000000ull * f;
    meta->calibration_seen = f > 0;
    meta->dropped = f == 2 ? 1 : 0;
    meta->stage_ns[GST_OP_STAGE_WARP] = 2000000;
    meta->stage_ns[GST_OP_STAGE_VISION] = 16000000;
    meta->stage_ns[GST_OP_STAGE_POLICY] = 3000000;
    if (f == 1)
      gst_util_set_object_arg(G_OBJECT(sink), "lane-change-state", "pre-lane-change");
    GstFlowReturn ret = gst_harness_push(h, buffer);
    if (ret != GST_FLOW_OK) {
      std::fprintf(stderr, "write-fixed-log: push returned %s\n", gst_flow_get_name(ret));
      return 1;
    }
  }
  if (kill)
    _exit(0);  // like SIGKILL: no state change, the zstd stream is never ended
  gst_harness_teardown(h);
  return 0;
}
