// Shared by the opmsgsink tests: a two-tensor raw output like the policy element's, buffers
// with GstOpFrameMeta, a GstHarness around a configured sink, and decoding of its messages.
#pragma once

#include <gtest/gtest.h>

#include <capnp/serialize.h>
#include <gst/check/gstharness.h>
#include <unistd.h>

#include <cmath>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "drive/fill.h"
#include "drive/log_io.h"
#include "drive/parse.h"
#include "gstopmsgsink.h"
#include "op/gstoptensor.h"

namespace msgtest {

// Starts GStreamer with no registry, so no plugin is scanned or loaded, and registers the
// opmsgsink linked into this program. The installed or built plugin holds the same element and
// GTypes, which must never be loaded next to this copy.
inline bool InitWithLinkedSink(int *argc, char ***argv) {
  g_setenv("GST_REGISTRY_DISABLE", "yes", TRUE);
  gst_init(argc, argv);
  return gst_element_register(nullptr, "opmsgsink", GST_RANK_NONE, GST_TYPE_OP_MSG_SINK);
}

using namespace op::drive;

// Two tensors, like the policy element's output: the vision outputs and the policy outputs.
struct Layout {
  GstOpTensorInfo info;
  size_t vision = 0, policy = 0;  // floats per tensor
};

inline Layout MakeLayout(bool with_lead = true) {
  const std::pair<const char *, size_t> vision[] = {
      {"hidden_state", 512},  {"lead", 102},
      {"pose", 12},           {"lane_lines", 528},
      {"lane_lines_prob", 8}, {"road_edges", 264},
      {"lead_prob", 3},       {"desire_pred", 32},
      {"meta", 55},           {"wide_from_device_euler", 6},
      {"road_transform", 12}};
  const std::pair<const char *, size_t> policy[] = {{"plan", 4955}, {"desire_state", 8}};
  Layout l;
  for (const auto &[name, width] : vision) {
    if (with_lead || std::string(name) != "lead")
      l.info.slices.push_back({"vision", name, int64_t(l.vision), int64_t(l.vision + width)});
    l.vision += width;
  }
  for (const auto &[name, width] : policy) {
    l.info.slices.push_back({"policy", name, int64_t(l.policy), int64_t(l.policy + width)});
    l.policy += width;
  }
  l.info.tensors.push_back({"vision", GstOpTensorType::kFloat32, {1, int64_t(l.vision)}});
  l.info.tensors.push_back({"policy", GstOpTensorType::kFloat32, {1, int64_t(l.policy)}});
  return l;
}

// The raw floats of frame f (vision then policy).
inline std::vector<float> RawFrame(const Layout &l, int f) {
  std::vector<float> raw(l.vision + l.policy);
  for (size_t i = 0; i < raw.size(); i++)
    raw[i] = float(1.5 * std::sin(0.21 * double(i) + f));
  return raw;
}

struct FrameSpec {
  uint32_t frame_id = 0;
  uint32_t dropped = 0;
  bool calibration_seen = true;
  GstClockTime pts = 0;
  bool with_meta = true;
};

inline GstBuffer *MakeBuffer(const Layout &l, const std::vector<float> &raw,
                             const FrameSpec &spec) {
  GstBuffer *buffer = gst_buffer_new();
  // One memory per tensor, in caps order.
  for (int t = 0; t < 2; t++) {
    size_t offset = t == 0 ? 0 : l.vision, n = t == 0 ? l.vision : l.policy;
    gpointer copy = g_memdup2(raw.data() + offset, n * 4);
    gst_buffer_append_memory(
        buffer, gst_memory_new_wrapped(GstMemoryFlags(0), copy, n * 4, 0, n * 4, copy, g_free));
  }
  GST_BUFFER_PTS(buffer) = spec.pts;
  if (spec.with_meta) {
    GstOpFrameMeta *meta = gst_buffer_add_op_frame_meta(buffer);
    meta->road_frame_id = spec.frame_id;
    meta->wide_frame_id = spec.frame_id + 1000;
    meta->road_eof_ns = 5000000000ull + spec.frame_id;
    meta->calibration_seen = spec.calibration_seen;
    meta->dropped = spec.dropped;
    meta->stage_ns[GST_OP_STAGE_WARP] = 1000000;
    meta->stage_ns[GST_OP_STAGE_VISION] = 10000000;
    meta->stage_ns[GST_OP_STAGE_POLICY] = 2000000;
  }
  return buffer;
}

struct Received {
  std::vector<std::string> services;
  std::vector<std::vector<uint8_t>> bytes;
};

inline void OnMessage(GstElement *, const char *service, GBytes *bytes, gpointer user) {
  auto *r = static_cast<Received *>(user);
  gsize size;
  auto *data = static_cast<const uint8_t *>(g_bytes_get_data(bytes, &size));
  r->services.push_back(service);
  r->bytes.emplace_back(data, data + size);
}

// An Event from flat-array bytes (kept alive with its words).
struct Decoded {
  kj::Array<capnp::word> words;
  std::unique_ptr<capnp::FlatArrayMessageReader> reader;
  op::msg::Event::Reader event() { return reader->getRoot<op::msg::Event>(); }
};

inline Decoded Decode(const std::vector<uint8_t> &bytes) {
  Decoded d;
  d.words = kj::heapArray<capnp::word>(bytes.size() / sizeof(capnp::word));
  std::memcpy(d.words.begin(), bytes.data(), bytes.size());
  d.reader = std::make_unique<capnp::FlatArrayMessageReader>(d.words);
  return d;
}

inline std::string TempPath(const std::string &name) {
  return std::string(g_get_tmp_dir()) + "/op-msgsink-" + std::to_string(getpid()) + "-" + name;
}

class Sink {
 public:
  Sink() {
    element = gst_element_factory_make("opmsgsink", nullptr);
    EXPECT_NE(element, nullptr);
    bus = gst_bus_new();
    gst_element_set_bus(element, bus);
    g_signal_connect(element, "message", G_CALLBACK(OnMessage), &received);
  }
  ~Sink() {
    if (h)
      gst_harness_teardown(h);
    else if (element)
      gst_object_unref(element);
    gst_object_unref(bus);
  }
  void Set(const char *name, const char *value) {
    gst_util_set_object_arg(G_OBJECT(element), name, value);
  }
  // Starts the harness around the configured element; cl_memory announces OpenCL memory.
  void Start(const Layout &l, bool cl_memory = false) {
    h = gst_harness_new_empty();
    static GstStaticPadTemplate src =
        GST_STATIC_PAD_TEMPLATE("src", GST_PAD_SRC, GST_PAD_ALWAYS, GST_STATIC_CAPS_ANY);
    gst_harness_add_element_full(h, element, &src, "sink", nullptr, nullptr);
    GstCaps *caps = gst_op_tensor_info_to_caps(l.info);
    if (cl_memory)
      gst_caps_set_features(caps, 0, gst_caps_features_new("memory:OpCLMemory", nullptr));
    gst_harness_set_src_caps(h, caps);
    gst_harness_play(h);
  }
  GstFlowReturn Push(GstBuffer *buffer) { return gst_harness_push(h, buffer); }
  // The text of the first error on the bus, or "".
  std::string Error() {
    std::string text;
    while (GstMessage *m = gst_bus_pop_filtered(bus, GST_MESSAGE_ERROR)) {
      GError *err = nullptr;
      gchar *debug = nullptr;
      gst_message_parse_error(m, &err, &debug);
      if (text.empty())
        text = std::string(err->message) + " | " + (debug ? debug : "");
      g_error_free(err);
      g_free(debug);
      gst_message_unref(m);
    }
    return text;
  }
  void Stop() {
    gst_harness_teardown(h);
    h = nullptr;
    element = nullptr;
  }

  GstElement *element = nullptr;
  GstHarness *h = nullptr;
  GstBus *bus = nullptr;
  Received received;
};

// What the library makes of frame f, for comparing with the element.
inline ParsedOutputs ParseRaw(const Layout &l, const std::vector<float> &raw) {
  SliceTable table;
  for (const auto &s : l.info.slices) {
    size_t base = s.tensor == "policy" ? l.vision : 0;
    table.push_back({s.name, base + size_t(s.start), base + size_t(s.end)});
  }
  auto parser = OutputParser::Create(table, raw.size());
  EXPECT_TRUE(parser.ok()) << parser.status().ToString();
  ParsedOutputs out;
  EXPECT_TRUE(parser->Parse(raw.data(), raw.size(), &out).ok());
  return out;
}

}  // namespace msgtest
