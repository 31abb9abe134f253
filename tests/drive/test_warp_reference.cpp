// The C++ reference warp against answers worked out by hand: channel layout, strides and plane
// offsets, round half to even, clamping, degenerate projections and refused inputs. The kernels
// are then compared with this reference (test_warp.cpp), and this reference with an independent
// numpy warp (warp_numpy_check.py).
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "drive/warp_reference.h"

using namespace op;
using namespace op::drive;

namespace {

// A frame whose every byte says where it is: Y(x, y) = (x + 3y) mod 251, U = (5x + y) mod 241,
// V = (x + 7y) mod 239 + 1; padding bytes are 0xEE so a stride mistake shows.
struct TestFrame {
  Nv12Layout layout;
  std::vector<uint8_t> bytes;

  explicit TestFrame(const Nv12Layout &l) : layout(l), bytes(l.MinBytes() + 64, 0xEE) {
    for (int y = 0; y < l.height; y++)
      for (int x = 0; x < l.width; x++)
        bytes[l.y_offset + y * l.y_stride + x] = Y(x, y);
    for (int y = 0; y < l.chroma_height(); y++)
      for (int x = 0; x < l.chroma_width(); x++) {
        bytes[l.uv_offset + y * l.uv_stride + 2 * x] = U(x, y);
        bytes[l.uv_offset + y * l.uv_stride + 2 * x + 1] = V(x, y);
      }
  }
  static uint8_t Y(int x, int y) { return uint8_t((x + 3 * y) % 251); }
  static uint8_t U(int x, int y) { return uint8_t((5 * x + y) % 241); }
  static uint8_t V(int x, int y) { return uint8_t((x + 7 * y) % 239 + 1); }
};

KernelMatrices Matrices(const Mat3 &m) {
  return ToKernelMatrices(m);
}

// The output byte holding model luma pixel (x, y) and chroma pixel (x, y) of channel 4 or 5.
uint8_t Luma(const std::vector<uint8_t> &out, int x, int y) {
  const int ch = (y % 2) + 2 * (x % 2);
  return out[ch * kPlaneBytes + (y / 2) * kPlaneCols + x / 2];
}
uint8_t Chroma(const std::vector<uint8_t> &out, int ch, int x, int y) {
  return out[ch * kPlaneBytes + y * kPlaneCols + x];
}

std::vector<uint8_t> Warp(const TestFrame &f, const Mat3 &m) {
  std::vector<uint8_t> out(kFrameTensorBytes, 0x55);
  Status s = WarpReference(f.bytes.data(), f.bytes.size(), f.layout, Matrices(m), out.data());
  EXPECT_TRUE(s.ok()) << s.ToString();
  return out;
}

}  // namespace

TEST(Nv12Layout, TightAndCameraLayouts) {
  const Nv12Layout tight = Nv12Layout::Tight(1928, 1208);
  EXPECT_EQ(tight.y_stride, 1928u);
  EXPECT_EQ(tight.uv_offset, 1928u * 1208u);
  EXPECT_EQ(tight.MinBytes(), 1928u * 1208u * 3 / 2);
  const Nv12Layout cam = Nv12Layout::Camera(1928, 1208);
  EXPECT_EQ(cam.y_stride, 2048u);
  EXPECT_EQ(cam.uv_stride, 2048u);
  EXPECT_EQ(cam.uv_offset, 2490368u);
  const Nv12Layout mici = Nv12Layout::Camera(1344, 760);
  EXPECT_EQ(mici.y_stride, 1408u);
  EXPECT_EQ(mici.uv_offset, 1081344u);
  EXPECT_TRUE(cam.Validate().ok());
  EXPECT_TRUE(mici.Validate().ok());
}

TEST(Nv12Layout, InconsistentLayoutsAreRefused) {
  Nv12Layout l = Nv12Layout::Tight(64, 32);
  l.y_stride = 63;
  EXPECT_EQ(l.Validate().code(), StatusCode::kInvalidArgument);
  l = Nv12Layout::Tight(64, 32);
  l.uv_offset = 64 * 31;  // UV would start inside the last Y row
  EXPECT_EQ(l.Validate().code(), StatusCode::kInvalidArgument);
  l = Nv12Layout::Tight(64, 32);
  l.uv_stride = 62;
  EXPECT_EQ(l.Validate().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(Nv12Layout::Tight(0, 32).Validate().code(), StatusCode::kInvalidArgument);
}

TEST(WarpReference, IdentityShowsTheChannelLayout) {
  Nv12Layout l = Nv12Layout::Tight(600, 300);
  l.y_stride = 640;  // padded rows and a gap before the UV plane
  l.uv_stride = 608;
  l.y_offset = 16;
  l.uv_offset = 16 + 640 * 300 + 128;
  TestFrame f(l);
  const std::vector<uint8_t> out = Warp(f, {{{1, 0, 0}, {0, 1, 0}, {0, 0, 1}}});
  for (int y = 0; y < kModelHeight; y++)
    for (int x = 0; x < kModelWidth; x++)
      ASSERT_EQ(Luma(out, x, y), TestFrame::Y(x, y)) << x << "," << y;
  // The contract's names for the four phases: ch0 = Y[0::2, 0::2], ch1 = Y[1::2, 0::2],
  // ch2 = Y[0::2, 1::2], ch3 = Y[1::2, 1::2] (rows first).
  EXPECT_EQ(out[0 * kPlaneBytes + 5 * kPlaneCols + 7], TestFrame::Y(14, 10));
  EXPECT_EQ(out[1 * kPlaneBytes + 5 * kPlaneCols + 7], TestFrame::Y(14, 11));
  EXPECT_EQ(out[2 * kPlaneBytes + 5 * kPlaneCols + 7], TestFrame::Y(15, 10));
  EXPECT_EQ(out[3 * kPlaneBytes + 5 * kPlaneCols + 7], TestFrame::Y(15, 11));
  for (int y = 0; y < kPlaneRows; y++)
    for (int x = 0; x < kPlaneCols; x++) {
      ASSERT_EQ(Chroma(out, 4, x, y), TestFrame::U(x, y)) << x << "," << y;
      ASSERT_EQ(Chroma(out, 5, x, y), TestFrame::V(x, y)) << x << "," << y;
    }
}

TEST(WarpReference, RoundsHalfToEven) {
  TestFrame f(Nv12Layout::Tight(600, 300));
  // Half scale: model x lands on x / 2, so every odd x sits exactly on a half.
  const std::vector<uint8_t> out = Warp(f, {{{0.5, 0, 0}, {0, 0.5, 0}, {0, 0, 1}}});
  auto half_even = [](int v) {  // round(v / 2) with ties to even, by hand
    const int q = v / 2;
    return (v % 2 == 0) ? q : (q % 2 == 0 ? q : q + 1);
  };
  EXPECT_EQ(half_even(1), 0);
  EXPECT_EQ(half_even(3), 2);
  EXPECT_EQ(half_even(5), 2);
  for (int y = 0; y < kModelHeight; y++)
    for (int x = 0; x < kModelWidth; x++)
      ASSERT_EQ(Luma(out, x, y), TestFrame::Y(half_even(x), half_even(y))) << x << "," << y;
  // Chroma gets S·M·S⁻¹ = the same half scale.
  for (int y = 0; y < kPlaneRows; y++)
    for (int x = 0; x < kPlaneCols; x++)
      ASSERT_EQ(Chroma(out, 4, x, y), TestFrame::U(half_even(x), half_even(y))) << x << "," << y;
}

TEST(WarpReference, ClampsToTheEdges) {
  TestFrame f(Nv12Layout::Camera(300, 100));
  // Shift left by 100 and down by 40 in a 300×100 frame: columns < 100 clamp to 0, columns
  // past 299 + 100 clamp to 299, rows past 59 clamp to 99.
  const std::vector<uint8_t> out = Warp(f, {{{1, 0, -100}, {0, 1, 40}, {0, 0, 1}}});
  for (int y = 0; y < kModelHeight; y++)
    for (int x = 0; x < kModelWidth; x++) {
      const int sx = std::min(std::max(x - 100, 0), 299);
      const int sy = std::min(y + 40, 99);
      ASSERT_EQ(Luma(out, x, y), TestFrame::Y(sx, sy)) << x << "," << y;
    }
  // Chroma: translation halves (−50, 20) in a 150×50 plane.
  for (int y = 0; y < kPlaneRows; y++)
    for (int x = 0; x < kPlaneCols; x++) {
      const int sx = std::min(std::max(x - 50, 0), 149);
      const int sy = std::min(y + 20, 49);
      ASSERT_EQ(Chroma(out, 5, x, y), TestFrame::V(sx, sy)) << x << "," << y;
    }
}

TEST(WarpReference, DegenerateProjectionsLandOnDefinedPixels) {
  TestFrame f(Nv12Layout::Tight(64, 48));
  // Third row zero: x/0 = +inf clamps to the last column and row.
  std::vector<uint8_t> out = Warp(f, {{{0, 0, 1}, {0, 0, 1}, {0, 0, 0}}});
  EXPECT_EQ(Luma(out, 3, 3), TestFrame::Y(63, 47));
  // Everything zero: 0/0 = NaN, taken as coordinate 0.
  out = Warp(f, {{{0, 0, 0}, {0, 0, 0}, {0, 0, 0}}});
  EXPECT_EQ(Luma(out, 9, 9), TestFrame::Y(0, 0));
  EXPECT_EQ(Chroma(out, 5, 9, 9), TestFrame::V(0, 0));
  // Negative infinity clamps to 0.
  out = Warp(f, {{{0, 0, -1}, {0, 0, 1}, {0, 0, 0}}});
  EXPECT_EQ(Luma(out, 1, 1), TestFrame::Y(0, 47));
}

TEST(WarpReference, ShortBuffersAreRefused) {
  const Nv12Layout l = Nv12Layout::Camera(1928, 1208);
  std::vector<uint8_t> frame(l.MinBytes() - 1), out(kFrameTensorBytes);
  Status s = WarpReference(frame.data(), frame.size(), l, Matrices({}), out.data());
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("needs"), std::string::npos) << s.message();
}

TEST(WarpReference, ToKernelMatricesRoundsOnce) {
  const Mat3 m = WarpMatrix(CameraIntrinsics(DeviceType::kTici, CameraRole::kRoad),
                            ModelIntrinsics(ModelFrame::kMedmodel), {0, 0.02, -0.01});
  const KernelMatrices k = ToKernelMatrices(m);
  const Mat3 uv = ChromaMatrix(m);
  for (int i = 0; i < 9; i++) {
    EXPECT_EQ(k.y[i], float(m[i / 3][i % 3]));
    EXPECT_EQ(k.uv[i], float(uv[i / 3][i % 3]));
  }
}
