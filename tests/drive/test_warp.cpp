// The warp kernels and the Warper on the machine's OpenCL device (PoCL in CI), compared bit for
// bit with the C++ reference: random frames, both sensor sizes, both model frames, several
// calibrations, tight and camera-style layouts; then the 5-frame history.
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <vector>

#include "cl/device.h"
#include "cl/queue.h"
#include "drive/warp.h"
#include "drive_kernels.h"

using namespace op;
using namespace op::drive;

namespace {

class WarpTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto dev = cl::Device::Open("auto");
    ASSERT_TRUE(dev.ok()) << dev.status().ToString();
    device = *dev;
    auto q = cl::Queue::Create(*device);
    ASSERT_TRUE(q.ok()) << q.status().ToString();
    queue = std::move(q).value();
  }

  // A random frame with random padding bytes, uploaded to a buffer of its own.
  std::vector<uint8_t> RandomFrame(const Nv12Layout &l, uint32_t seed) {
    std::mt19937 rng(seed);
    std::vector<uint8_t> bytes(l.MinBytes());
    for (auto &b : bytes)
      b = uint8_t(rng());
    return bytes;
  }
  cl::MemHandle Upload(const std::vector<uint8_t> &bytes) {
    auto mem = device->CreateBuffer(bytes.size());
    EXPECT_TRUE(mem.ok()) << mem.status().ToString();
    auto w = queue.Write(mem->get(), 0, bytes.size(), bytes.data());
    EXPECT_TRUE(w.ok());
    EXPECT_TRUE(cl::WaitForEvent(w->get()).ok());
    return std::move(mem).value();
  }
  std::vector<uint8_t> Download(cl_mem mem, size_t bytes, cl_event after) {
    std::vector<uint8_t> host(bytes);
    auto r = queue.Read(mem, 0, bytes, host.data(), {after});
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_TRUE(cl::WaitForEvent(r->get()).ok());
    return host;
  }
  std::vector<uint8_t> Reference(const std::vector<uint8_t> &frame, const Nv12Layout &l,
                                 const Mat3 &m) {
    std::vector<uint8_t> out(kFrameTensorBytes);
    Status s = WarpReference(frame.data(), frame.size(), l, ToKernelMatrices(m), out.data());
    EXPECT_TRUE(s.ok()) << s.ToString();
    return out;
  }

  std::shared_ptr<cl::Device> device;
  cl::Queue queue;
};

// Where two prepared frames first differ, as "channel c row r col x: got vs want".
std::string FirstDifference(const std::vector<uint8_t> &got, const std::vector<uint8_t> &want,
                            size_t base = 0) {
  size_t diffs = 0, first = 0;
  for (size_t i = 0; i < want.size(); i++)
    if (got[base + i] != want[i]) {
      if (!diffs)
        first = i;
      diffs++;
    }
  if (!diffs)
    return "";
  const size_t ch = first / kPlaneBytes, rem = first % kPlaneBytes;
  return std::to_string(diffs) + " bytes differ; first at channel " + std::to_string(ch) + " row " +
         std::to_string(rem / kPlaneCols) + " col " + std::to_string(rem % kPlaneCols) + ": got " +
         std::to_string(got[base + first]) + ", want " + std::to_string(want[first]);
}

struct Case {
  DeviceType device;
  bool camera_layout;
};

const Rpy kCalibrations[] = {
    {0, 0, 0},
    {0, 0.02, -0.01},
    {0.015, -0.035, 0.04},
    {-0.1, 0.08, -0.12},  // far outside real calibrations: exercises the clamped borders
};

}  // namespace

TEST_F(WarpTest, CoordinatesMatchTheReferenceBitForBit) {
  // The kernels' arithmetic itself: unrounded coordinates over the whole luma grid, for every
  // vector width. A fused multiply-add or an inexact division on either side shows up here first.
  const int w = kModelWidth, h = kModelHeight;
  auto buf = device->CreateBuffer(size_t(w) * h * 2 * sizeof(float));
  ASSERT_TRUE(buf.ok());
  for (int vec : {1, 4, 16}) {
    auto program =
        device->programs().Build(kernels::Find("warp"), WarpBuildOptions(*device, vec), "warp");
    ASSERT_TRUE(program.ok()) << program.status().ToString();
    auto kernel = cl::CreateKernel(program->get(), "op_warp_coords");
    ASSERT_TRUE(kernel.ok()) << kernel.status().ToString();
    for (DeviceType t : {DeviceType::kTici, DeviceType::kMici})
      for (CameraRole r : {CameraRole::kRoad, CameraRole::kWide})
        for (const Rpy &rpy : kCalibrations) {
          const ModelFrame f =
              r == CameraRole::kRoad ? ModelFrame::kMedmodel : ModelFrame::kSbigmodel;
          const KernelMatrices km =
              ToKernelMatrices(WarpMatrix(CameraIntrinsics(t, r), ModelIntrinsics(f), rpy));
          for (const float *m : {km.y, km.uv}) {
            cl_float16 arg{};
            std::memcpy(arg.s, m, 9 * sizeof(float));
            cl_mem out = buf->get();
            ASSERT_TRUE(cl::SetArgs(kernel->get(), out, w, h, arg).ok());
            const size_t global[2] = {size_t(w / vec), size_t(h)};
            auto run = queue.Launch(kernel->get(), 2, global, nullptr);
            ASSERT_TRUE(run.ok()) << run.status().ToString();
            std::vector<float> got(size_t(w) * h * 2);
            auto rd = queue.Read(out, 0, got.size() * sizeof(float), got.data(), {run->get()});
            ASSERT_TRUE(rd.ok() && cl::WaitForEvent(rd->get()).ok());
            for (int y = 0; y < h; y++)
              for (int x = 0; x < w; x++) {
                float sx, sy;
                WarpCoordinate(m, x, y, &sx, &sy);
                const float gx = got[2 * (size_t(y) * w + x)];
                const float gy = got[2 * (size_t(y) * w + x) + 1];
                ASSERT_EQ(std::memcmp(&gx, &sx, 4), 0)
                    << "width " << vec << " at " << x << "," << y << ": " << gx << " vs " << sx;
                ASSERT_EQ(std::memcmp(&gy, &sy, 4), 0)
                    << "width " << vec << " at " << x << "," << y << ": " << gy << " vs " << sy;
              }
          }
        }
  }
}

TEST_F(WarpTest, KernelEqualsReferenceOnRandomFrames) {
  uint32_t seed = 1;
  for (Case c : {Case{DeviceType::kTici, false}, Case{DeviceType::kTici, true},
                 Case{DeviceType::kMici, false}, Case{DeviceType::kMici, true}}) {
    const FrameSize size = SensorSize(c.device);
    const Nv12Layout l = c.camera_layout ? Nv12Layout::Camera(size.width, size.height)
                                         : Nv12Layout::Tight(size.width, size.height);
    auto warper = Warper::Create(device, queue, l);
    ASSERT_TRUE(warper.ok()) << warper.status().ToString();
    auto dst = device->CreateBuffer(kFrameTensorBytes);
    ASSERT_TRUE(dst.ok());
    for (ModelFrame f : {ModelFrame::kMedmodel, ModelFrame::kSbigmodel}) {
      const CameraRole role = f == ModelFrame::kMedmodel ? CameraRole::kRoad : CameraRole::kWide;
      for (const Rpy &rpy : kCalibrations) {
        const std::vector<uint8_t> frame = RandomFrame(l, seed++);
        cl::MemHandle mem = Upload(frame);
        const Mat3 m = WarpMatrix(CameraIntrinsics(c.device, role), ModelIntrinsics(f), rpy);
        (*warper)->SetMatrix(m);
        auto ev = (*warper)->WarpOnce(mem.get(), dst->get(), 0, {});
        ASSERT_TRUE(ev.ok()) << ev.status().ToString();
        const std::vector<uint8_t> got = Download(dst->get(), kFrameTensorBytes, ev->get());
        const std::string diff = FirstDifference(got, Reference(frame, l, m));
        EXPECT_EQ(diff, "") << DeviceTypeName(c.device) << (c.camera_layout ? " camera" : " tight")
                            << " layout, " << ModelFrameName(f) << ", rpy " << FormatRpy(rpy);
      }
    }
  }
}

TEST_F(WarpTest, EveryVectorWidthGivesTheSameBytes) {
  // GPUs get narrower vectors than PoCL: the widths they use are checked here on any device.
  const Nv12Layout l = Nv12Layout::Camera(1928, 1208);
  const Mat3 m = WarpMatrix(CameraIntrinsics(DeviceType::kTici, CameraRole::kWide),
                            ModelIntrinsics(ModelFrame::kSbigmodel), {0.02, 0.01, -0.03});
  const std::vector<uint8_t> frame = RandomFrame(l, 4242);
  const std::vector<uint8_t> want = Reference(frame, l, m);
  cl::MemHandle mem = Upload(frame);
  auto dst = device->CreateBuffer(kFrameTensorBytes);
  ASSERT_TRUE(dst.ok());
  for (int vec : {1, 2, 4, 8, 16}) {
    auto warper = Warper::Create(device, queue, l, vec);
    ASSERT_TRUE(warper.ok()) << warper.status().ToString();
    (*warper)->SetMatrix(m);
    auto ev = (*warper)->WarpOnce(mem.get(), dst->get(), 0, {});
    ASSERT_TRUE(ev.ok()) << ev.status().ToString();
    EXPECT_EQ(FirstDifference(Download(dst->get(), kFrameTensorBytes, ev->get()), want), "")
        << "vector width " << vec;
  }
  EXPECT_FALSE(Warper::Create(device, queue, l, 3).ok());
}

TEST_F(WarpTest, DegenerateMatricesMatchTheReference) {
  // Division by zero and 0/0 (NaN) must land where the reference puts them: the clamp order
  // and fmax/fmin's NaN rule are part of the contract between the two.
  const Nv12Layout l = Nv12Layout::Tight(1344, 760);
  const std::vector<uint8_t> frame = RandomFrame(l, 77);
  cl::MemHandle mem = Upload(frame);
  auto dst = device->CreateBuffer(kFrameTensorBytes);
  ASSERT_TRUE(dst.ok());
  auto warper = Warper::Create(device, queue, l);
  ASSERT_TRUE(warper.ok());
  const Mat3 cases[] = {
      {{{0, 0, 1}, {0, 0, 1}, {0, 0, 0}}},         // +inf
      {{{0, 0, -1}, {0, 0, 1}, {0, 0, 0}}},        // -inf and +inf
      {{{0, 0, 0}, {0, 0, 0}, {0, 0, 0}}},         // NaN
      {{{1, 0, 0}, {0, 1, 0}, {-0.004, 0, 1}}},    // the horizon crosses the output
      {{{1e30, 0, 0}, {0, -1e30, 0}, {0, 0, 1}}},  // coordinates beyond int range
  };
  for (const Mat3 &m : cases) {
    (*warper)->SetMatrix(m);
    auto ev = (*warper)->WarpOnce(mem.get(), dst->get(), 0, {});
    ASSERT_TRUE(ev.ok()) << ev.status().ToString();
    EXPECT_EQ(
        FirstDifference(Download(dst->get(), kFrameTensorBytes, ev->get()), Reference(frame, l, m)),
        "")
        << "matrix row 0: " << m[0][0] << " " << m[0][1] << " " << m[0][2];
  }
}

TEST_F(WarpTest, OddLayoutsAndPlaneOffsets) {
  // Any size once the intrinsics are given: an odd-sized frame with a Y offset, padded strides
  // and a UV plane placed before the Y plane.
  Nv12Layout l;
  l.width = 641;
  l.height = 357;
  l.uv_offset = 40;
  l.uv_stride = 700;
  l.y_offset = l.uv_offset + l.uv_stride * size_t(l.chroma_height()) + 24;
  l.y_stride = 655;
  auto warper = Warper::Create(device, queue, l);
  ASSERT_TRUE(warper.ok()) << warper.status().ToString();
  const Mat3 m = WarpMatrix({400, 410, 320.5, 178.5}, ModelIntrinsics(ModelFrame::kSbigmodel),
                            {0.02, -0.03, 0.05});
  (*warper)->SetMatrix(m);
  const std::vector<uint8_t> frame = RandomFrame(l, 99);
  cl::MemHandle mem = Upload(frame);
  auto dst = device->CreateBuffer(3 * kFrameTensorBytes);
  ASSERT_TRUE(dst.ok());
  auto fill = queue.Fill(dst->get(), 0, 3 * kFrameTensorBytes, 0x77);
  ASSERT_TRUE(fill.ok());
  auto ev = (*warper)->WarpOnce(mem.get(), dst->get(), kFrameTensorBytes, {fill->get()});
  ASSERT_TRUE(ev.ok()) << ev.status().ToString();
  const std::vector<uint8_t> got = Download(dst->get(), 3 * kFrameTensorBytes, ev->get());
  EXPECT_EQ(FirstDifference(got, Reference(frame, l, m), kFrameTensorBytes), "");
  // Nothing outside the destination slot was written.
  for (size_t i = 0; i < kFrameTensorBytes; i++) {
    ASSERT_EQ(got[i], 0x77) << i;
    ASSERT_EQ(got[2 * kFrameTensorBytes + i], 0x77) << i;
  }
}

TEST_F(WarpTest, HistoryEmitsFrameTMinus4AndFrameT) {
  const Nv12Layout l = Nv12Layout::Camera(1928, 1208);
  auto warper = Warper::Create(device, queue, l);
  ASSERT_TRUE(warper.ok()) << warper.status().ToString();
  const Mat3 m = WarpMatrix(CameraIntrinsics(DeviceType::kTici, CameraRole::kRoad),
                            ModelIntrinsics(ModelFrame::kMedmodel), {0, 0.02, -0.01});
  (*warper)->SetMatrix(m);
  auto out = device->CreateBuffer(kModelInputBytes);
  ASSERT_TRUE(out.ok());
  const std::vector<uint8_t> zeros(kFrameTensorBytes, 0);
  std::vector<std::vector<uint8_t>> prepared;
  for (int t = 0; t < 12; t++) {
    if (t == 9) {
      // A flush: the history starts again from zeros.
      ASSERT_TRUE((*warper)->Reset().ok());
      prepared.clear();
    }
    const std::vector<uint8_t> frame = RandomFrame(l, 1000 + t);
    cl::MemHandle mem = Upload(frame);
    prepared.push_back(Reference(frame, l, m));
    cl::EventHandle warp_event;
    auto ev = (*warper)->Process(mem.get(), out->get(), 0, {}, &warp_event);
    ASSERT_TRUE(ev.ok()) << ev.status().ToString();
    EXPECT_TRUE(warp_event);
    const std::vector<uint8_t> got = Download(out->get(), kModelInputBytes, ev->get());
    const size_t n = prepared.size();
    const std::vector<uint8_t> &oldest = n >= 5 ? prepared[n - 5] : zeros;
    EXPECT_EQ(FirstDifference(got, oldest, 0), "") << "frame " << t << ": channels 0-5 (t-4)";
    EXPECT_EQ(FirstDifference(got, prepared.back(), kFrameTensorBytes), "")
        << "frame " << t << ": channels 6-11 (t)";
  }
  EXPECT_EQ((*warper)->frames(), 3u);
}

TEST_F(WarpTest, OutputOffsetAndEventChaining) {
  // The output at an offset inside a larger buffer, after an event the caller gives.
  const Nv12Layout l = Nv12Layout::Tight(1344, 760);
  auto warper = Warper::Create(device, queue, l);
  ASSERT_TRUE(warper.ok());
  const std::vector<uint8_t> frame = RandomFrame(l, 7);
  auto mem = device->CreateBuffer(frame.size());
  ASSERT_TRUE(mem.ok());
  auto upload = queue.Write(mem->get(), 0, frame.size(), frame.data());  // not waited for
  ASSERT_TRUE(upload.ok());
  auto out = device->CreateBuffer(kModelInputBytes + 4096);
  ASSERT_TRUE(out.ok());
  auto ev = (*warper)->Process(mem->get(), out->get(), 4096, {upload->get()});
  ASSERT_TRUE(ev.ok()) << ev.status().ToString();
  const std::vector<uint8_t> got = Download(out->get(), kModelInputBytes + 4096, ev->get());
  const Mat3 identity = {{{1, 0, 0}, {0, 1, 0}, {0, 0, 1}}};
  EXPECT_EQ(FirstDifference(got, Reference(frame, l, identity), 4096 + kFrameTensorBytes), "");
}

TEST_F(WarpTest, ShortBuffersAreRefusedBeforeAnythingRuns) {
  const Nv12Layout l = Nv12Layout::Camera(1928, 1208);
  auto warper = Warper::Create(device, queue, l);
  ASSERT_TRUE(warper.ok());
  auto small = device->CreateBuffer(l.MinBytes() - 1);
  auto out = device->CreateBuffer(kModelInputBytes);
  auto big = device->CreateBuffer(l.MinBytes());
  ASSERT_TRUE(small.ok() && out.ok() && big.ok());
  auto a = (*warper)->Process(small->get(), out->get(), 0, {});
  ASSERT_FALSE(a.ok());
  EXPECT_EQ(a.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(a.status().message().find("frame"), std::string::npos) << a.status().message();
  auto b = (*warper)->Process(big->get(), out->get(), 1, {});
  ASSERT_FALSE(b.ok());
  EXPECT_NE(b.status().message().find("output"), std::string::npos) << b.status().message();
  EXPECT_EQ((*warper)->frames(), 0u);  // a refused frame does not enter the history
  ASSERT_TRUE(queue.Finish().ok());
}

TEST_F(WarpTest, InvalidLayoutsAreRefusedAtCreation) {
  Nv12Layout l = Nv12Layout::Tight(1928, 1208);
  l.y_stride = 1000;
  auto w = Warper::Create(device, queue, l);
  ASSERT_FALSE(w.ok());
  EXPECT_EQ(w.status().code(), StatusCode::kInvalidArgument);
}
