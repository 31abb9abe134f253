// The temporal queues on the machine's OpenCL device (PoCL in CI): the device rings against the
// shifting host reference (bit-exact: the queues only copy and take maxes), and both against
// answers worked out by hand from the contract (§4).
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <thread>
#include <vector>

#include "cl/device.h"
#include "cl/queue.h"
#include "drive/temporal.h"

using namespace op;
using namespace op::drive;

namespace {

class TemporalTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto dev = cl::Device::Open("auto");
    ASSERT_TRUE(dev.ok()) << dev.status().ToString();
    device = *dev;
    auto q = cl::Queue::Create(*device);
    ASSERT_TRUE(q.ok()) << q.status().ToString();
    queue = std::move(q).value();
  }

  std::unique_ptr<TemporalQueues> Make(const TemporalShape &shape = {}) {
    auto t = TemporalQueues::Create(device, queue, shape);
    EXPECT_TRUE(t.ok()) << t.status().ToString();
    return t.ok() ? std::move(t).value() : nullptr;
  }

  cl::MemHandle Buffer(size_t floats) {
    auto b = device->CreateBuffer(floats * sizeof(float));
    EXPECT_TRUE(b.ok()) << b.status().ToString();
    return b.ok() ? std::move(b).value() : cl::MemHandle();
  }

  // Writes `host` into `mem` at float 0 and returns the write's event (the host vector must
  // outlive it; the callers wait before they change it).
  cl::EventHandle Upload(cl_mem mem, const std::vector<float> &host) {
    auto e = queue.Write(mem, 0, host.size() * sizeof(float), host.data());
    EXPECT_TRUE(e.ok()) << e.status().ToString();
    return e.ok() ? std::move(e).value() : cl::EventHandle();
  }

  std::vector<float> Download(cl_mem mem, size_t floats, size_t offset, cl_event after) {
    std::vector<float> out(floats, -1.0f);
    auto e = queue.Read(mem, offset * sizeof(float), floats * sizeof(float), out.data(), {after});
    EXPECT_TRUE(e.ok()) << e.status().ToString();
    if (e.ok()) {
      EXPECT_TRUE(cl::WaitForEvent(e->get()).ok());
    }
    return out;
  }

  void MatchReference(const TemporalShape &shape, int frames);

  std::shared_ptr<cl::Device> device;
  cl::Queue queue;
};

bool SameBits(const std::vector<float> &a, const float *b, size_t n) {
  return a.size() == n && std::memcmp(a.data(), b, n * sizeof(float)) == 0;
}

// A desire sequence with runs, repeats of the same desire after "none", direct changes from
// one desire to another, a desire on the very first frame, and all seven values.
std::vector<Desire> DesireSequence(int frames) {
  struct Run {
    Desire d;
    int n;
  };
  const Run runs[] = {
      {Desire::kLaneChangeLeft, 3},  {Desire::kNone, 9},
      {Desire::kTurnLeft, 17},       {Desire::kNone, 2},
      {Desire::kTurnLeft, 5},        {Desire::kTurnRight, 1},
      {Desire::kLaneChangeRight, 6}, {Desire::kNone, 30},
      {Desire::kKeepLeft, 2},        {Desire::kKeepRight, 2},
      {Desire::kKeepLeft, 1},        {Desire::kNone, 1},
      {Desire::kLaneChangeLeft, 40}, {Desire::kNone, 11},
      {Desire::kLaneChangeRight, 3},
  };
  std::vector<Desire> seq;
  while (int(seq.size()) < frames)
    for (const Run &r : runs)
      for (int i = 0; i < r.n; i++)
        seq.push_back(r.d);
  seq.resize(frames);
  return seq;
}

// Pushes `frames` random hidden states (a slice in the middle of a larger "vision output") and a
// desire sequence, comparing the three inputs with the reference after every frame.
void TemporalTest::MatchReference(const TemporalShape &shape, int frames) {
  auto tq = Make(shape);
  ASSERT_TRUE(tq);
  TemporalQueuesReference ref(shape);

  const size_t start = 1001, end = start + shape.width, out_floats = end + 77;
  cl::MemHandle vision = Buffer(out_floats);
  std::mt19937 rng(6 + shape.lag);
  std::normal_distribution<float> normal(0.0f, 3.0f);
  const std::vector<Desire> desires = DesireSequence(frames);
  std::vector<float> host(out_floats);
  for (int n = 0; n < frames; n++) {
    for (float &v : host)
      v = normal(rng);
    const TrafficConvention traffic =
        (n / 37) % 2 ? TrafficConvention::kLeftHand : TrafficConvention::kRightHand;
    cl::EventHandle up = Upload(vision.get(), host);
    auto f = tq->PushFeatures(queue, vision.get(), start, end, {up.get(), tq->ready_event()});
    ASSERT_TRUE(f.ok()) << f.status().ToString();
    auto d = tq->PushDesire(queue, desires[n], traffic, {tq->ready_event()});
    ASSERT_TRUE(d.ok()) << d.status().ToString();
    ref.PushFeatures(host.data() + start);
    ref.PushDesire(desires[n], traffic);

    auto feats = Download(tq->features(), shape.features_floats(), 0, f->get());
    auto pulses = Download(tq->desire_pulse(), shape.desire_floats(), 0, d->get());
    auto tc = Download(tq->traffic_convention(), 2, 0, d->get());
    ASSERT_TRUE(SameBits(feats, ref.features().data(), ref.features().size())) << "frame " << n;
    ASSERT_TRUE(SameBits(pulses, ref.desire_pulse().data(), ref.desire_pulse().size()))
        << "frame " << n;
    ASSERT_TRUE(SameBits(tc, ref.traffic_convention().data(), 2)) << "frame " << n;
  }
  EXPECT_EQ(tq->features_pushed(), frames);
  EXPECT_EQ(tq->desires_pushed(), frames);
}

TEST_F(TemporalTest, DeviceMatchesTheShiftingReferenceBitForBit) {
  MatchReference(TemporalShape{}, 173);
}

TEST_F(TemporalTest, DeviceMatchesTheReferenceForACombinedNetwork) {
  TemporalShape shape;
  shape.lag = shape.skip - 1;
  MatchReference(shape, 161);
}

TEST_F(TemporalTest, DeviceMatchesTheReferenceForOddShapes) {
  TemporalShape shape;
  shape.steps = 7;
  shape.skip = 3;
  shape.width = 13;
  shape.desire_width = 9;
  for (int lag = 0; lag < shape.skip; lag++) {
    shape.lag = lag;
    MatchReference(shape, 50);
  }
}

// Known answers, independent of both implementations: hidden state of frame n is
// n·1000 + f, so every sampled value names the frame it came from.
TEST_F(TemporalTest, FeaturesAreEveryFourthEndingWithTheNewestAndZerosBeforeTheStart) {
  auto tq = Make();
  ASSERT_TRUE(tq);
  const TemporalShape shape = tq->shape();
  ASSERT_EQ(shape.steps, 25);
  ASSERT_EQ(shape.skip, 4);
  ASSERT_EQ(shape.width, 512);
  TemporalQueuesReference ref(shape);
  cl::MemHandle vision = Buffer(shape.width);
  std::vector<float> host(shape.width);

  // Before any push: zeros.
  auto zeros = Download(tq->features(), shape.features_floats(), 0, tq->ready_event());
  for (float v : zeros)
    ASSERT_EQ(v, 0.0f);

  for (int n = 0; n < 150; n++) {
    for (int f = 0; f < shape.width; f++)
      host[f] = float(n * 1000 + f);
    cl::EventHandle up = Upload(vision.get(), host);
    auto e = tq->PushFeatures(queue, vision.get(), 0, shape.width, {up.get()});
    ASSERT_TRUE(e.ok()) << e.status().ToString();
    ref.PushFeatures(host.data());
    auto feats = Download(tq->features(), shape.features_floats(), 0, e->get());
    for (int s = 0; s < 25; s++) {
      // Step s is the entry −97 + 4s of the queue: (24 − s)·4 frames before frame n.
      const int source = n - (24 - s) * 4;
      for (int f = 0; f < shape.width; f += 97) {
        const float want = source >= 0 ? float(source * 1000 + f) : 0.0f;
        ASSERT_EQ(feats[s * shape.width + f], want) << "frame " << n << " step " << s;
        ASSERT_EQ(ref.features()[s * shape.width + f], want) << "reference, frame " << n;
      }
    }
  }
}

// The combined network appends this frame's hidden state itself, so after pushing frame n its
// input must hold frames n − 99, n − 95, …, n − 3: with this frame (n + 1) appended the network
// sees n + 1 − 96, …, n + 1 − 4, n + 1, the separate policy network's history.
TEST_F(TemporalTest, CombinedNetworkFeaturesEndOneSkipBeforeTheNextFrame) {
  TemporalShape shape;
  shape.lag = 3;
  auto tq = Make(shape);
  ASSERT_TRUE(tq);
  cl::MemHandle vision = Buffer(shape.width);
  std::vector<float> host(shape.width);
  for (int n = 0; n < 130; n++) {
    for (int f = 0; f < shape.width; f++)
      host[f] = float(n * 1000 + f);
    cl::EventHandle up = Upload(vision.get(), host);
    auto e = tq->PushFeatures(queue, vision.get(), 0, shape.width, {up.get()});
    ASSERT_TRUE(e.ok()) << e.status().ToString();
    auto feats = Download(tq->features(), shape.features_floats(), 0, e->get());
    const int next = n + 1;
    for (int s = 1; s < 25; s++) {
      // What the network sees at step s − 1 (it drops step 0): frame next − 96 + 4(s − 1).
      const int source = next - 96 + 4 * (s - 1);
      for (int f = 0; f < shape.width; f += 101) {
        const float want = source >= 0 ? float(source * 1000 + f) : 0.0f;
        ASSERT_EQ(feats[s * shape.width + f], want) << "frame " << n << " step " << s;
      }
    }
    const int dropped = next - 100;  // step 0, which the network ignores
    ASSERT_EQ(feats[5], dropped >= 0 ? float(dropped * 1000 + 5) : 0.0f) << "frame " << n;
  }
}

TEST_F(TemporalTest, EachRisingEdgePulsesOnceAndIsMaxPooledOverGroupsOfFour) {
  auto tq = Make();
  ASSERT_TRUE(tq);
  const TemporalShape shape = tq->shape();
  TemporalQueuesReference ref(shape);
  const int frames = 160;
  const std::vector<Desire> desires = DesireSequence(frames);
  // Edges by hand from DesireSequence's runs: the first frame of every non-"none" run.
  std::vector<int> edge_desire(frames, -1);
  // Held desires (frames 1-2, 13-28, 80-118) and "none" never pulse; frame 133 follows another
  // desire directly, frame 31 repeats the desire of an earlier run after two frames of "none".
  const int run_starts[][2] = {{0, 3},  {12, 1}, {31, 1}, {36, 2},  {37, 4},  {73, 5},
                               {75, 6}, {77, 5}, {79, 3}, {130, 4}, {133, 3}, {145, 1}};
  for (const auto &r : run_starts)
    edge_desire[r[0]] = r[1];

  for (int n = 0; n < frames; n++) {
    auto e = tq->PushDesire(queue, desires[n], TrafficConvention::kRightHand);
    ASSERT_TRUE(e.ok()) << e.status().ToString();
    ref.PushDesire(desires[n], TrafficConvention::kRightHand);
    auto pulses = Download(tq->desire_pulse(), shape.desire_floats(), 0, e->get());
    for (int s = 0; s < 25; s++)
      for (int j = 0; j < 8; j++) {
        // Group s holds the frames n − 99 + 4s … n − 96 + 4s.
        float want = 0.0f;
        for (int k = 0; k < 4; k++) {
          const int frame = n - 99 + 4 * s + k;
          if (frame >= 0 && edge_desire[frame] == j)
            want = 1.0f;
        }
        ASSERT_EQ(pulses[s * 8 + j], want) << "frame " << n << " group " << s << " desire " << j;
        ASSERT_EQ(ref.desire_pulse()[s * 8 + j], want) << "reference, frame " << n;
      }
  }
}

TEST_F(TemporalTest, TrafficConventionIsOneHotRightHandFirst) {
  auto tq = Make();
  ASSERT_TRUE(tq);
  auto before = Download(tq->traffic_convention(), 2, 0, tq->ready_event());
  EXPECT_EQ(before, (std::vector<float>{0.0f, 0.0f}));
  auto r = tq->PushDesire(queue, Desire::kNone, TrafficConvention::kRightHand);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(Download(tq->traffic_convention(), 2, 0, r->get()), (std::vector<float>{1.0f, 0.0f}));
  auto l = tq->PushDesire(queue, Desire::kNone, TrafficConvention::kLeftHand);
  ASSERT_TRUE(l.ok());
  EXPECT_EQ(Download(tq->traffic_convention(), 2, 0, l->get()), (std::vector<float>{0.0f, 1.0f}));
}

TEST_F(TemporalTest, ResetBringsBackZerosAndForgetsThePreviousDesire) {
  auto tq = Make();
  ASSERT_TRUE(tq);
  const TemporalShape shape = tq->shape();
  cl::MemHandle vision = Buffer(shape.width);
  std::vector<float> ones(shape.width, 1.0f);
  cl::EventHandle up = Upload(vision.get(), ones);
  for (int n = 0; n < 5; n++) {
    ASSERT_TRUE(tq->PushFeatures(queue, vision.get(), 0, shape.width, {up.get()}).ok());
    ASSERT_TRUE(tq->PushDesire(queue, Desire::kKeepLeft, TrafficConvention::kLeftHand).ok());
  }
  auto reset = tq->Reset(queue);
  ASSERT_TRUE(reset.ok()) << reset.status().ToString();
  EXPECT_EQ(tq->features_pushed(), 0);
  for (float v : Download(tq->features(), shape.features_floats(), 0, reset->get()))
    ASSERT_EQ(v, 0.0f);
  for (float v : Download(tq->desire_pulse(), shape.desire_floats(), 0, reset->get()))
    ASSERT_EQ(v, 0.0f);
  EXPECT_EQ(Download(tq->traffic_convention(), 2, 0, reset->get()),
            (std::vector<float>{0.0f, 0.0f}));
  // The same desire as before the reset is a rising edge again.
  auto d = tq->PushDesire(queue, Desire::kKeepLeft, TrafficConvention::kLeftHand);
  ASSERT_TRUE(d.ok());
  auto pulses = Download(tq->desire_pulse(), shape.desire_floats(), 0, d->get());
  EXPECT_EQ(pulses[24 * 8 + int(Desire::kKeepLeft)], 1.0f);
  // The old ring entries are gone: only the newest hidden state is non-zero.
  auto f = tq->PushFeatures(queue, vision.get(), 0, shape.width, {up.get()});
  ASSERT_TRUE(f.ok());
  auto feats = Download(tq->features(), shape.features_floats(), 0, f->get());
  for (int s = 0; s < shape.steps; s++)
    ASSERT_EQ(feats[s * shape.width + 7], s == shape.steps - 1 ? 1.0f : 0.0f) << s;
}

// A network whose inputs live inside one bigger buffer: each push writes only its tensor.
TEST_F(TemporalTest, TargetsAtOffsetsWriteOnlyTheirTensor) {
  TemporalShape shape;
  shape.steps = 3;
  shape.skip = 2;
  shape.width = 5;
  shape.desire_width = 8;
  auto tq = Make(shape);
  ASSERT_TRUE(tq);
  TemporalQueuesReference ref(shape);
  const size_t arena_floats = 200;
  cl::MemHandle arena = Buffer(arena_floats);
  std::vector<float> sentinel(arena_floats, -7.0f);
  cl::EventHandle init = Upload(arena.get(), sentinel);
  ASSERT_TRUE(cl::WaitForEvent(init.get()).ok());
  const size_t f_off = 13, d_off = 61, t_off = 97;
  ASSERT_TRUE(
      tq->SetTargets({arena.get(), f_off}, {arena.get(), d_off}, {arena.get(), t_off}).ok());
  cl::MemHandle src = Buffer(16);
  std::vector<float> host(16);
  cl::EventHandle last;
  for (int n = 0; n < 11; n++) {
    for (int i = 0; i < 16; i++)
      host[i] = float(n) + 0.01f * i;
    cl::EventHandle up = Upload(src.get(), host);
    auto f = tq->PushFeatures(queue, src.get(), 9, 14, {up.get()});
    ASSERT_TRUE(f.ok()) << f.status().ToString();
    const Desire d = n % 3 ? Desire::kTurnRight : Desire::kNone;
    auto e = tq->PushDesire(queue, d, TrafficConvention::kLeftHand, {f->get()});
    ASSERT_TRUE(e.ok()) << e.status().ToString();
    ASSERT_TRUE(cl::WaitForEvent(e->get()).ok());  // `host` is rewritten next iteration
    ref.PushFeatures(host.data() + 9);
    ref.PushDesire(d, TrafficConvention::kLeftHand);
    last = std::move(e).value();
  }
  auto all = Download(arena.get(), arena_floats, 0, last.get());
  for (size_t i = 0; i < arena_floats; i++) {
    float want = -7.0f;
    if (i >= f_off && i < f_off + 15)
      want = ref.features()[i - f_off];
    else if (i >= d_off && i < d_off + 24)
      want = ref.desire_pulse()[i - d_off];
    else if (i >= t_off && i < t_off + 2)
      want = ref.traffic_convention()[i - t_off];
    ASSERT_EQ(all[i], want) << "arena float " << i;
  }
  // The owned buffers were not written after the redirect: still zero.
  for (float v : Download(tq->features(), shape.features_floats(), 0, last.get()))
    ASSERT_EQ(v, 0.0f);
}

// The push is ordered after its wait list: a kernel waiting on an unfinished event must not run.
TEST_F(TemporalTest, PushWaitsForItsWaitList) {
  auto tq = Make();
  ASSERT_TRUE(tq);
  cl::MemHandle vision = Buffer(512);
  cl_int err = CL_SUCCESS;
  cl::EventHandle gate(clCreateUserEvent(device->context(), &err));
  ASSERT_EQ(err, CL_SUCCESS);
  auto e = tq->PushFeatures(queue, vision.get(), 0, 512, {gate.get()});
  ASSERT_TRUE(e.ok()) << e.status().ToString();
  ASSERT_TRUE(queue.Flush().ok());
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  cl_int state = CL_QUEUED;
  ASSERT_EQ(
      clGetEventInfo(e->get(), CL_EVENT_COMMAND_EXECUTION_STATUS, sizeof(state), &state, nullptr),
      CL_SUCCESS);
  EXPECT_GT(state, CL_COMPLETE) << "the push ran before its wait list completed";
  ASSERT_EQ(clSetUserEventStatus(gate.get(), CL_COMPLETE), CL_SUCCESS);
  EXPECT_TRUE(cl::WaitForEvent(e->get()).ok());
}

TEST_F(TemporalTest, BadInputsAreErrorsThatNameTheProblem) {
  auto tq = Make();
  ASSERT_TRUE(tq);
  cl::MemHandle small = Buffer(600);
  // A slice of the wrong width.
  auto w = tq->PushFeatures(queue, small.get(), 0, 500);
  ASSERT_FALSE(w.ok());
  EXPECT_EQ(w.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(w.status().message().find("500 floats wide"), std::string::npos)
      << w.status().message();
  // A slice past the end of the buffer.
  auto past = tq->PushFeatures(queue, small.get(), 100, 612);
  ASSERT_FALSE(past.ok());
  EXPECT_NE(past.status().message().find("2400 bytes"), std::string::npos)
      << past.status().message();
  // A desire outside the enum.
  auto d = tq->PushDesire(queue, static_cast<Desire>(7), TrafficConvention::kRightHand);
  ASSERT_FALSE(d.ok());
  EXPECT_NE(d.status().message().find("desire 7"), std::string::npos);
  // Failed pushes change nothing.
  EXPECT_EQ(tq->features_pushed(), 0);
  EXPECT_EQ(tq->desires_pushed(), 0);
  // A target too small for its tensor.
  auto t = tq->SetTargets({small.get(), 100}, {}, {});
  ASSERT_FALSE(t.ok());
  EXPECT_NE(t.message().find("features_buffer"), std::string::npos);
  // A shape that cannot work.
  TemporalShape bad;
  bad.skip = 0;
  auto b = TemporalQueues::Create(device, queue, bad);
  ASSERT_FALSE(b.ok());
  EXPECT_NE(b.status().message().find("skip 0"), std::string::npos);
  TemporalShape late;
  late.lag = late.skip;
  auto l = TemporalQueues::Create(device, queue, late);
  ASSERT_FALSE(l.ok());
  EXPECT_NE(l.status().message().find("lag 4"), std::string::npos) << l.status().message();
}

}  // namespace
