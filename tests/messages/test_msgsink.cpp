// opmsgsink with GstHarness: negotiation (a missing slice is named), messages in the log and in
// the signal, frames after a drop, live car state, timestamps, errors, and ZMQ publishing.
// Expected message contents come from the op::drive library on the same raw floats, whose own
// tests compare it with the numpy reference.
#include <gtest/gtest.h>

#include <chrono>
#include <ctime>
#include <thread>

#ifdef OP_HAVE_ZMQ
#include <zmq.h>
#endif

#include "msgsink_fixture.h"

namespace {

using namespace msgtest;
using namespace op::drive;

TEST(MsgSink, WritesEveryServiceToLogAndSignal) {
  const std::string path = TempPath("rlog.zst");
  Layout l = MakeLayout();
  Sink sink;
  sink.Set("location", path.c_str());
  sink.Set("emit-signals", "true");
  sink.Set("timestamps", "stream");
  sink.Start(l);
  for (int f = 0; f < 3; f++) {
    FrameSpec spec;
    spec.frame_id = 20 + f;
    spec.pts = 50 * GST_MSECOND * f;
    spec.calibration_seen = f > 0;
    ASSERT_EQ(sink.Push(MakeBuffer(l, RawFrame(l, f), spec)), GST_FLOW_OK) << sink.Error();
  }
  guint64 count = 0;
  g_object_get(sink.element, "messages", &count, nullptr);
  EXPECT_EQ(count, 9u);
  Received received = sink.received;
  sink.Stop();

  auto log = ReadLog(path);
  ASSERT_TRUE(log.ok()) << log.status().ToString();
  EXPECT_EQ(log->format, "zstd");
  EXPECT_FALSE(log->truncated);
  ASSERT_EQ(log->messages.size(), 9u);
  ASSERT_EQ(received.bytes.size(), 9u);
  const char *order[3] = {"modelV2", "drivingModelData", "cameraOdometry"};
  for (size_t i = 0; i < 9; i++) {
    auto bytes = log->messages[i].asBytes();
    EXPECT_EQ(std::vector<uint8_t>(bytes.begin(), bytes.end()), received.bytes[i]) << i;
    EXPECT_EQ(received.services[i], order[i % 3]);
    Decoded d = Decode(received.bytes[i]);
    EXPECT_EQ(EventServiceName(d.event()), order[i % 3]);
    EXPECT_EQ(d.event().getLogMonoTime(), 50 * GST_MSECOND * (i / 3));  // stream: the PTS
    EXPECT_EQ(d.event().getValid(), i >= 3);
  }
  // Contents against the library on frame 1's floats.
  ParsedOutputs p = ParseRaw(l, RawFrame(l, 1));
  Decoded m = Decode(received.bytes[3]);
  auto v2 = m.event().getModelV2();
  EXPECT_EQ(v2.getFrameId(), 21u);
  EXPECT_EQ(v2.getFrameIdExtra(), 1021u);
  EXPECT_EQ(v2.getTimestampEof(), 5000000021ull);
  EXPECT_EQ(v2.getPosition().getX()[7], p.Plan(7, 0));
  EXPECT_EQ(v2.getLeadsV3()[1].getX()[2], p.Lead(1, 2, 0));
  EXPECT_EQ(v2.getMeta().getDesireState()[4], p.desire_state[4]);
  // Stream mode: the upstream stage times only (1 + 10 + 2 ms), so replays repeat their bytes.
  EXPECT_FLOAT_EQ(v2.getModelExecutionTime(), 0.013f);
  Decoded o = Decode(received.bytes[5]);
  EXPECT_EQ(o.event().getCameraOdometry().getTrans()[1], p.pose[1]);
  std::remove(path.c_str());
}

TEST(MsgSink, StreamTimestampsRepeatTheBytes) {
  Layout l = MakeLayout();
  std::vector<std::vector<uint8_t>> runs[2];
  for (auto &run : runs) {
    Sink sink;
    sink.Set("emit-signals", "true");
    sink.Set("timestamps", "stream");
    sink.Start(l);
    for (int f = 0; f < 2; f++) {
      FrameSpec spec;
      spec.frame_id = f;
      spec.pts = GST_SECOND * f;
      ASSERT_EQ(sink.Push(MakeBuffer(l, RawFrame(l, f), spec)), GST_FLOW_OK);
    }
    run = sink.received.bytes;
  }
  ASSERT_EQ(runs[0].size(), 6u);
  EXPECT_EQ(runs[0], runs[1]);
}

TEST(MsgSink, ClockTimestampsAreMonotonicNow) {
  Layout l = MakeLayout();
  Sink sink;
  sink.Set("emit-signals", "true");
  sink.Set("services", "cameraOdometry");
  sink.Start(l);
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  const uint64_t before = uint64_t(ts.tv_sec) * 1000000000ull + ts.tv_nsec;
  ASSERT_EQ(sink.Push(MakeBuffer(l, RawFrame(l, 0), FrameSpec{})), GST_FLOW_OK);
  clock_gettime(CLOCK_MONOTONIC, &ts);
  const uint64_t after = uint64_t(ts.tv_sec) * 1000000000ull + ts.tv_nsec;
  ASSERT_EQ(sink.received.bytes.size(), 1u);
  uint64_t t = Decode(sink.received.bytes[0]).event().getLogMonoTime();
  EXPECT_GE(t, before);
  EXPECT_LE(t, after);
}

// Every warning on the sink's bus so far, one per line.
std::vector<std::string> Warnings(Sink &sink) {
  std::vector<std::string> out;
  while (GstMessage *m = gst_bus_pop_filtered(sink.bus, GST_MESSAGE_WARNING)) {
    GError *err = nullptr;
    gchar *debug = nullptr;
    gst_message_parse_warning(m, &err, &debug);
    out.push_back(std::string(err->message) + " | " + (debug ? debug : ""));
    g_error_free(err);
    g_free(debug);
    gst_message_unref(m);
  }
  return out;
}

std::vector<uint64_t> LogTimes(const Received &received) {
  std::vector<uint64_t> t;
  for (const auto &bytes : received.bytes)
    t.push_back(Decode(bytes).event().getLogMonoTime());
  return t;
}

// Frames without a PTS and PTS going backwards: logMonoTime still increases (a frame without a
// PTS 1 ns after the previous one; a backward jump shifts the later PTS so their spacing stays),
// and one warning per kind names the frame and the PTS.
TEST(MsgSink, MissingAndBackwardPtsWarnOnceAndLogTimesStayIncreasing) {
  constexpr GstClockTime kNone = GST_CLOCK_TIME_NONE, ms = GST_MSECOND;
  Layout l = MakeLayout();
  Sink sink;
  sink.Set("emit-signals", "true");
  sink.Set("timestamps", "stream");
  sink.Set("services", "modelV2");
  sink.Start(l);
  const GstClockTime pts[] = {100 * ms, 150 * ms, kNone, 200 * ms,
                              120 * ms, 170 * ms, kNone, 90 * ms};
  for (int f = 0; f < 8; f++) {
    FrameSpec spec;
    spec.with_meta = false;  // frame ids counted from 0, no end-of-frame time but the PTS
    spec.pts = pts[f];
    ASSERT_EQ(sink.Push(MakeBuffer(l, RawFrame(l, f), spec)), GST_FLOW_OK) << sink.Error();
  }
  // Worked out by hand from the rule: frame 4 (120 ms after 200 ms) lands 1 ns after frame 3,
  // a shift of 80 ms + 1 ns that frame 5 keeps; frame 7 (90 ms) lands 1 ns after frame 6.
  const std::vector<uint64_t> want = {100 * ms,     150 * ms,     150 * ms + 1, 200 * ms,
                                      200 * ms + 1, 250 * ms + 1, 250 * ms + 2, 250 * ms + 3};
  EXPECT_EQ(LogTimes(sink.received), want);
  const std::vector<std::string> warnings = Warnings(sink);
  ASSERT_EQ(warnings.size(), 2u) << ::testing::PrintToString(warnings);
  EXPECT_NE(warnings[0].find("Frame 2 has no PTS"), std::string::npos) << warnings[0];
  EXPECT_NE(warnings[1].find("Frame 4 has PTS 0:00:00.120000000, before the previous frame's "
                             "0:00:00.200000000"),
            std::string::npos)
      << warnings[1];

  // After a flush (a seek), an earlier PTS is no warning; logMonoTime still goes on increasing.
  ASSERT_TRUE(gst_harness_push_event(sink.h, gst_event_new_flush_start()));
  ASSERT_TRUE(gst_harness_push_event(sink.h, gst_event_new_flush_stop(TRUE)));
  GstSegment segment;
  gst_segment_init(&segment, GST_FORMAT_TIME);
  ASSERT_TRUE(gst_harness_push_event(sink.h, gst_event_new_segment(&segment)));
  for (int f = 0; f < 2; f++) {
    FrameSpec spec;
    spec.with_meta = false;
    spec.pts = 50 * ms * f;
    ASSERT_EQ(sink.Push(MakeBuffer(l, RawFrame(l, f), spec)), GST_FLOW_OK) << sink.Error();
  }
  const std::vector<uint64_t> times = LogTimes(sink.received);
  ASSERT_EQ(times.size(), 10u);
  EXPECT_EQ(times[8], 250 * ms + 4);
  EXPECT_EQ(times[9], 300 * ms + 4);
  EXPECT_EQ(Warnings(sink).size(), 0u);
}

// Clock mode: the times are the clock's, increasing; a frame without a PTS is still reported.
TEST(MsgSink, ClockModeReportsAMissingPtsOnce) {
  Layout l = MakeLayout();
  Sink sink;
  sink.Set("emit-signals", "true");
  sink.Set("services", "modelV2");
  sink.Start(l);
  for (int f = 0; f < 3; f++) {
    FrameSpec spec;
    spec.frame_id = 7 + f;
    spec.pts = GST_CLOCK_TIME_NONE;
    ASSERT_EQ(sink.Push(MakeBuffer(l, RawFrame(l, f), spec)), GST_FLOW_OK) << sink.Error();
  }
  const std::vector<uint64_t> times = LogTimes(sink.received);
  ASSERT_EQ(times.size(), 3u);
  EXPECT_LT(times[0], times[1]);
  EXPECT_LT(times[1], times[2]);
  const std::vector<std::string> warnings = Warnings(sink);
  ASSERT_EQ(warnings.size(), 1u) << ::testing::PrintToString(warnings);
  EXPECT_NE(warnings[0].find("Frame 7 has no PTS"), std::string::npos) << warnings[0];
}

// deterministic=true writes modelExecutionTime as 0 (the default records the stage times).
TEST(MsgSink, DeterministicWritesZeroExecutionTime) {
  Layout l = MakeLayout();
  for (const char *deterministic : {"false", "true"}) {
    Sink sink;
    sink.Set("emit-signals", "true");
    sink.Set("timestamps", "stream");
    sink.Set("services", "modelV2,drivingModelData");
    sink.Set("deterministic", deterministic);
    sink.Start(l);
    FrameSpec spec;
    spec.frame_id = 3;
    ASSERT_EQ(sink.Push(MakeBuffer(l, RawFrame(l, 0), spec)), GST_FLOW_OK) << sink.Error();
    ASSERT_EQ(sink.received.bytes.size(), 2u);
    const float want = std::string(deterministic) == "true" ? 0.0f : 0.013f;
    EXPECT_FLOAT_EQ(Decode(sink.received.bytes[0]).event().getModelV2().getModelExecutionTime(),
                    want);
    EXPECT_FLOAT_EQ(
        Decode(sink.received.bytes[1]).event().getDrivingModelData().getModelExecutionTime(), want);
  }
}

TEST(MsgSink, FramesAfterADropProduceNothing) {
  Layout l = MakeLayout();
  Sink sink;
  sink.Set("emit-signals", "true");
  sink.Set("services", "modelV2");
  sink.Start(l);
  for (uint32_t f = 0; f < 14; f++) {
    FrameSpec spec;
    spec.frame_id = f;
    spec.dropped = f == 12 ? 1 : 0;
    ASSERT_EQ(sink.Push(MakeBuffer(l, RawFrame(l, 0), spec)), GST_FLOW_OK);
  }
  ASSERT_EQ(sink.received.bytes.size(), 13u);  // frame 12 followed a drop
  for (size_t i = 0; i < 12; i++)
    EXPECT_EQ(Decode(sink.received.bytes[i]).event().getModelV2().getFrameDropPerc(), 0.0f);
  // Frame 13: the filter saw one drop of 1 frame one update before (held at 0 for 10 frames).
  const double k = 0.05 / 10.05, f = k * (1 - k);
  auto last = Decode(sink.received.bytes[12]);
  EXPECT_EQ(last.event().getModelV2().getFrameId(), 13u);
  EXPECT_NEAR(last.event().getModelV2().getFrameDropPerc(), 100 * f / (1 + f), 1e-5);
}

TEST(MsgSink, MissingSliceFailsNegotiationNamingIt) {
  Layout l = MakeLayout(/*with_lead=*/false);
  Sink sink;
  sink.Start(l);
  EXPECT_EQ(sink.Push(MakeBuffer(l, RawFrame(l, 0), FrameSpec{})), GST_FLOW_NOT_NEGOTIATED);
  std::string error = sink.Error();
  EXPECT_NE(error.find("'lead' (needed by modelV2)"), std::string::npos) << error;
  // The same caps again with the next buffer: refused again, but not reported twice.
  EXPECT_EQ(sink.Push(MakeBuffer(l, RawFrame(l, 0), FrameSpec{})), GST_FLOW_NOT_NEGOTIATED);
  EXPECT_EQ(sink.Error(), "");

  // Without modelV2 nothing needs the lead.
  Sink odo;
  odo.Set("services", "drivingModelData,cameraOdometry");
  odo.Set("emit-signals", "true");
  odo.Start(l);
  EXPECT_EQ(odo.Push(MakeBuffer(l, RawFrame(l, 0), FrameSpec{})), GST_FLOW_OK) << odo.Error();
  EXPECT_EQ(odo.received.services,
            (std::vector<std::string>{"drivingModelData", "cameraOdometry"}));
}

TEST(MsgSink, UnwritableLocationIsAClearError) {
  Sink sink;
  sink.Set("location", "/nonexistent-dir-of-op/rlog.zst");
  EXPECT_EQ(gst_element_set_state(sink.element, GST_STATE_PLAYING), GST_STATE_CHANGE_FAILURE);
  std::string error = sink.Error();
  EXPECT_NE(error.find("/nonexistent-dir-of-op/rlog.zst"), std::string::npos) << error;
  EXPECT_NE(error.find("for writing"), std::string::npos) << error;
  gst_element_set_state(sink.element, GST_STATE_NULL);
}

TEST(MsgSink, TruncatedTensorIsAnError) {
  Layout l = MakeLayout();
  Sink sink;
  sink.Start(l);
  std::vector<float> raw = RawFrame(l, 0);
  GstBuffer *buffer = MakeBuffer(l, raw, FrameSpec{});
  gst_buffer_resize(buffer, 0, gst_buffer_get_size(buffer) - 4);
  EXPECT_EQ(sink.Push(buffer), GST_FLOW_ERROR);
  EXPECT_NE(sink.Error().find("tensor \"policy\""), std::string::npos);
}

TEST(MsgSink, CarStateChangesWhilePlaying) {
  Layout l = MakeLayout();
  Sink sink;
  sink.Set("emit-signals", "true");
  sink.Set("services", "drivingModelData");
  sink.Start(l);
  std::vector<float> raw = RawFrame(l, 2);
  ASSERT_EQ(sink.Push(MakeBuffer(l, raw, FrameSpec{})), GST_FLOW_OK);
  g_object_set(sink.element, "v-ego", 15.0f, "lat-delay", 0.2f, nullptr);
  gst_util_set_object_arg(G_OBJECT(sink.element), "lane-change-state", "lane-change-starting");
  gst_util_set_object_arg(G_OBJECT(sink.element), "lane-change-direction", "right");
  ASSERT_EQ(sink.Push(MakeBuffer(l, raw, FrameSpec{})), GST_FLOW_OK);
  ASSERT_EQ(sink.received.bytes.size(), 2u);
  auto first = Decode(sink.received.bytes[0]);
  auto second = Decode(sink.received.bytes[1]);
  // Stopped (v-ego 0): the curvature is held at its initial 0; at 15 m/s it follows the plan.
  EXPECT_EQ(first.event().getDrivingModelData().getAction().getDesiredCurvature(), 0.0f);
  ParsedOutputs p = ParseRaw(l, raw);
  CarSettings car;
  car.v_ego = 15.0f;
  car.lat_delay = 0.2f;
  Action expected = ComputeAction(p, car, Action{});
  ASSERT_NE(expected.desired_curvature, 0.0f);
  EXPECT_EQ(second.event().getDrivingModelData().getAction().getDesiredCurvature(),
            expected.desired_curvature);
  auto meta = second.event().getDrivingModelData().getMeta();
  EXPECT_EQ(meta.getLaneChangeState(), op::msg::LaneChangeState::LANE_CHANGE_STARTING);
  EXPECT_EQ(meta.getLaneChangeDirection(), op::msg::LaneChangeDirection::RIGHT);
}

TEST(MsgSink, StopMidStreamLeavesACompleteLog) {
  const std::string path = TempPath("stopped.zst");
  Layout l = MakeLayout();
  {
    Sink sink;
    sink.Set("location", path.c_str());
    sink.Start(l);
    for (uint32_t f = 0; f < 2; f++) {
      FrameSpec spec;
      spec.frame_id = f;
      ASSERT_EQ(sink.Push(MakeBuffer(l, RawFrame(l, f), spec)), GST_FLOW_OK);
    }
  }  // to NULL without EOS
  auto log = ReadLog(path);
  ASSERT_TRUE(log.ok()) << log.status().ToString();
  EXPECT_FALSE(log->truncated);
  EXPECT_EQ(log->messages.size(), 6u);
  std::remove(path.c_str());
}

TEST(MsgSink, InvalidServicesFailStart) {
  Sink sink;
  sink.Set("services", "modelV2,laneLines");
  EXPECT_EQ(gst_element_set_state(sink.element, GST_STATE_PLAYING), GST_STATE_CHANGE_FAILURE);
  std::string error = sink.Error();
  EXPECT_NE(error.find("'laneLines'"), std::string::npos) << error;
  gst_element_set_state(sink.element, GST_STATE_NULL);
}

TEST(MsgSink, Float16TensorsAreWidened) {
  // The same outputs as float16: every value below is exact in half precision, so the
  // messages must equal those of the float32 stream.
  Layout l32 = MakeLayout();
  Layout l16 = l32;
  for (auto &t : l16.info.tensors)
    t.type = GstOpTensorType::kFloat16;
  std::vector<float> raw = RawFrame(l32, 3);
  std::vector<uint16_t> half(raw.size());
  for (size_t i = 0; i < raw.size(); i++) {
    // Round to a multiple of 1/256 in [-2, 2]: representable as a normal half.
    float q = std::round(raw[i] * 256.0f) / 256.0f;
    raw[i] = q;
    uint32_t bits;
    std::memcpy(&bits, &q, 4);
    if (q == 0.0f) {
      half[i] = uint16_t(bits >> 16);
      continue;
    }
    const uint32_t sign = bits >> 31, exponent = (bits >> 23) & 0xff, mantissa = bits & 0x7fffff;
    half[i] = uint16_t(sign << 15 | (exponent - 127 + 15) << 10 | mantissa >> 13);
  }
  std::vector<std::vector<uint8_t>> out[2];
  for (int run = 0; run < 2; run++) {
    Sink sink;
    sink.Set("emit-signals", "true");
    sink.Set("timestamps", "stream");
    sink.Start(run == 0 ? l32 : l16);
    GstBuffer *buffer = gst_buffer_new();
    for (int t = 0; t < 2; t++) {
      size_t offset = t == 0 ? 0 : l32.vision, n = t == 0 ? l32.vision : l32.policy;
      gpointer copy =
          run == 0 ? g_memdup2(raw.data() + offset, n * 4) : g_memdup2(half.data() + offset, n * 2);
      gsize bytes = run == 0 ? n * 4 : n * 2;
      gst_buffer_append_memory(
          buffer, gst_memory_new_wrapped(GstMemoryFlags(0), copy, bytes, 0, bytes, copy, g_free));
    }
    GstOpFrameMeta *meta = gst_buffer_add_op_frame_meta(buffer);
    meta->calibration_seen = TRUE;
    ASSERT_EQ(sink.Push(buffer), GST_FLOW_OK) << sink.Error();
    out[run] = sink.received.bytes;
  }
  ASSERT_EQ(out[0].size(), 3u);
  EXPECT_EQ(out[0], out[1]);
}

#ifdef OP_HAVE_ZMQ
TEST(MsgSink, PublishReachesASubscriber) {
  Layout l = MakeLayout();
  Sink sink;
  sink.Set("publish", "true");
  sink.Start(l);
  if (!sink.Error().empty())
    GTEST_FAIL() << "publisher did not start";
  void *context = zmq_ctx_new();
  void *sub = zmq_socket(context, ZMQ_SUB);
  ASSERT_EQ(zmq_setsockopt(sub, ZMQ_SUBSCRIBE, "", 0), 0);
  int timeout_ms = 50;
  zmq_setsockopt(sub, ZMQ_RCVTIMEO, &timeout_ms, sizeof(timeout_ms));
  ASSERT_EQ(zmq_connect(sub, "tcp://127.0.0.1:58537"), 0);  // modelV2's bridge port
  // A subscription takes a moment to reach the publisher; publish until one message arrives.
  std::vector<uint8_t> got;
  for (uint32_t f = 0; f < 100 && got.empty(); f++) {
    FrameSpec spec;
    spec.frame_id = 300 + f;
    ASSERT_EQ(sink.Push(MakeBuffer(l, RawFrame(l, 0), spec)), GST_FLOW_OK);
    uint8_t buffer[65536];
    int n = zmq_recv(sub, buffer, sizeof(buffer), 0);
    if (n > 0)
      got.assign(buffer, buffer + n);
  }
  zmq_close(sub);
  zmq_ctx_term(context);
  ASSERT_FALSE(got.empty()) << "nothing received on 127.0.0.1:58537";
  Decoded d = Decode(got);
  ASSERT_TRUE(d.event().isModelV2());
  EXPECT_GE(d.event().getModelV2().getFrameId(), 300u);
}

TEST(MsgSink, PublishPortInUseIsNamed) {
  Layout l = MakeLayout();
  Sink first;
  first.Set("publish", "true");
  first.Set("services", "cameraOdometry");
  first.Start(l);
  ASSERT_EQ(first.Error(), "");
  Sink second;
  second.Set("publish", "true");
  second.Set("services", "cameraOdometry");
  EXPECT_EQ(gst_element_set_state(second.element, GST_STATE_PLAYING), GST_STATE_CHANGE_FAILURE);
  std::string error = second.Error();
  EXPECT_NE(error.find("tcp://127.0.0.1:50972"), std::string::npos) << error;
  gst_element_set_state(second.element, GST_STATE_NULL);
}
#endif

}  // namespace

int main(int argc, char **argv) {
  if (!InitWithLinkedSink(&argc, &argv))
    return 1;
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
