// Camera presets, model frames and warp matrices against the known answers of the contract
// page (§1–2), to 1e-4, and the parsing of the user's calibration and intrinsics strings.
#include <gtest/gtest.h>

#include <cmath>

#include "drive/camera.h"

using namespace op;
using namespace op::drive;

namespace {

void ExpectMatNear(const Mat3 &got, const Mat3 &want, double tol, const char *what) {
  for (int i = 0; i < 3; i++)
    for (int j = 0; j < 3; j++)
      EXPECT_NEAR(got[i][j], want[i][j], tol) << what << " [" << i << "][" << j << "]";
}

Mat3 Identity() {
  return {{{1, 0, 0}, {0, 1, 0}, {0, 0, 1}}};
}

}  // namespace

TEST(Camera, PresetsFollowTheContractTable) {
  const Intrinsics tici_road = CameraIntrinsics(DeviceType::kTici, CameraRole::kRoad);
  EXPECT_EQ(tici_road.fx, 2648.0);
  EXPECT_EQ(tici_road.fy, 2648.0);
  EXPECT_EQ(tici_road.cx, 964.0);
  EXPECT_EQ(tici_road.cy, 604.0);
  EXPECT_EQ(CameraIntrinsics(DeviceType::kTici, CameraRole::kWide).fx, 567.0);
  // tizi uses the tici sensor geometry and focal lengths.
  for (CameraRole r : {CameraRole::kRoad, CameraRole::kWide}) {
    const Intrinsics a = CameraIntrinsics(DeviceType::kTici, r);
    const Intrinsics b = CameraIntrinsics(DeviceType::kTizi, r);
    EXPECT_EQ(a.fx, b.fx);
    EXPECT_EQ(a.cx, b.cx);
    EXPECT_EQ(a.cy, b.cy);
  }
  EXPECT_EQ(SensorSize(DeviceType::kTizi).width, 1928);
  EXPECT_EQ(SensorSize(DeviceType::kTizi).height, 1208);
  const Intrinsics mici_road = CameraIntrinsics(DeviceType::kMici, CameraRole::kRoad);
  EXPECT_EQ(mici_road.fx, 1141.5);
  EXPECT_EQ(mici_road.cx, 672.0);
  EXPECT_EQ(mici_road.cy, 380.0);
  EXPECT_EQ(CameraIntrinsics(DeviceType::kMici, CameraRole::kWide).fy, 425.25);

  const Intrinsics med = ModelIntrinsics(ModelFrame::kMedmodel);
  EXPECT_EQ(med.fx, 910.0);
  EXPECT_EQ(med.cx, 256.0);
  EXPECT_EQ(med.cy, 47.6);
  const Intrinsics sbig = ModelIntrinsics(ModelFrame::kSbigmodel);
  EXPECT_EQ(sbig.fx, 455.0);
  EXPECT_EQ(sbig.cy, 151.8);
}

TEST(Camera, DeviceTypeFromFrameSize) {
  auto tici = DeviceTypeFromFrameSize(1928, 1208);
  ASSERT_TRUE(tici.ok());
  EXPECT_EQ(*tici, DeviceType::kTici);
  auto mici = DeviceTypeFromFrameSize(1344, 760);
  ASSERT_TRUE(mici.ok());
  EXPECT_EQ(*mici, DeviceType::kMici);
  auto other = DeviceTypeFromFrameSize(1920, 1080);
  ASSERT_FALSE(other.ok());
  EXPECT_EQ(other.status().code(), StatusCode::kNotFound);
  EXPECT_NE(other.status().message().find("1920x1080"), std::string::npos);
  EXPECT_NE(other.status().message().find("intrinsics"), std::string::npos);
}

TEST(Camera, PresetIntrinsicsForAFrameSize) {
  // Auto goes by the frame size; tizi shares tici's sensor.
  auto auto_mici = PresetIntrinsics(std::nullopt, CameraRole::kWide, 1344, 760);
  ASSERT_TRUE(auto_mici.ok());
  EXPECT_EQ(auto_mici->fx, CameraIntrinsics(DeviceType::kMici, CameraRole::kWide).fx);
  auto tizi = PresetIntrinsics(DeviceType::kTizi, CameraRole::kRoad, 1928, 1208);
  ASSERT_TRUE(tizi.ok());
  EXPECT_EQ(tizi->fx, CameraIntrinsics(DeviceType::kTizi, CameraRole::kRoad).fx);
  auto none = PresetIntrinsics(std::nullopt, CameraRole::kRoad, 640, 480);
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.status().code(), StatusCode::kNotFound);
  auto mismatch = PresetIntrinsics(DeviceType::kMici, CameraRole::kRoad, 1928, 1208);
  ASSERT_FALSE(mismatch.ok());
  EXPECT_EQ(mismatch.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(mismatch.status().message().find("mici"), std::string::npos);
  EXPECT_NE(mismatch.status().message().find("intrinsics"), std::string::npos);
}

TEST(Camera, ParseDeviceType) {
  EXPECT_EQ(*ParseDeviceType("tizi"), DeviceType::kTizi);
  EXPECT_EQ(*ParseDeviceType("MICI"), DeviceType::kMici);
  auto bad = ParseDeviceType("pixel");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("\"pixel\""), std::string::npos);
}

TEST(Camera, RotationIsRzRyRx) {
  ExpectMatNear(RotationFromRpy({}), Identity(), 0, "R(0)");
  // A pure yaw of +90° turns x (forward) into y (right) in the device frame.
  const Mat3 yaw = RotationFromRpy({0, 0, M_PI / 2});
  ExpectMatNear(yaw, {{{0, -1, 0}, {1, 0, 0}, {0, 0, 1}}}, 1e-15, "yaw 90");
  const Mat3 pitch = RotationFromRpy({0, M_PI / 2, 0});
  ExpectMatNear(pitch, {{{0, 0, 1}, {0, 1, 0}, {-1, 0, 0}}}, 1e-15, "pitch 90");
  const Mat3 roll = RotationFromRpy({M_PI / 2, 0, 0});
  ExpectMatNear(roll, {{{1, 0, 0}, {0, 0, -1}, {0, 1, 0}}}, 1e-15, "roll 90");
  // Composition order: Rz(yaw)·Ry(pitch)·Rx(roll), checked against the product of the three.
  const Rpy rpy{0.3, -0.2, 0.1};
  const Mat3 composed =
      Multiply(RotationFromRpy({0, 0, rpy.yaw}),
               Multiply(RotationFromRpy({0, rpy.pitch, 0}), RotationFromRpy({rpy.roll, 0, 0})));
  ExpectMatNear(RotationFromRpy(rpy), composed, 1e-15, "composition");
}

TEST(Camera, KnownAnswerTiciRoadMedmodel) {
  const Mat3 m = WarpMatrix(CameraIntrinsics(DeviceType::kTici, CameraRole::kRoad),
                            ModelIntrinsics(ModelFrame::kMedmodel), {});
  ExpectMatNear(m, {{{2.90989, 0, 219.068132}, {0, 2.90989, 465.489231}, {0, 0, 1}}}, 1e-4,
                "tici road medmodel");
  const auto p = Project(m, 256, 47.6);
  EXPECT_NEAR(p[0], 964, 1e-4);
  EXPECT_NEAR(p[1], 604, 1e-4);
}

TEST(Camera, KnownAnswerTiciWideSbigmodel) {
  const Mat3 m = WarpMatrix(CameraIntrinsics(DeviceType::kTici, CameraRole::kWide),
                            ModelIntrinsics(ModelFrame::kSbigmodel), {});
  ExpectMatNear(m, {{{1.246154, 0, 644.984615}, {0, 1.246154, 414.833846}, {0, 0, 1}}}, 1e-4,
                "tici wide sbigmodel");
}

TEST(Camera, KnownAnswerMiciRoadMedmodel) {
  const Mat3 m = WarpMatrix(CameraIntrinsics(DeviceType::kMici, CameraRole::kRoad),
                            ModelIntrinsics(ModelFrame::kMedmodel), {});
  ExpectMatNear(m, {{{1.254396, 0, 350.874725}, {0, 1.254396, 320.290769}, {0, 0, 1}}}, 1e-4,
                "mici road medmodel");
}

TEST(Camera, KnownAnswerTiciRoadWithCalibration) {
  const Mat3 m = WarpMatrix(CameraIntrinsics(DeviceType::kTici, CameraRole::kRoad),
                            ModelIntrinsics(ModelFrame::kMedmodel), {0, 0.02, -0.01});
  // The contract gives these to six decimals ("≈"): compare each to its last printed digit.
  const Mat3 want = {{{2.920338, 0.020602, 188.69759},
                      {0.006637, 2.922581, 410.078533},
                      {0.000011, 0.000022, 0.995891}}};
  ExpectMatNear(m, want, 1e-4, "tici road rpy (0, 0.02, -0.01)");
  const auto p = Project(m, 0, 0);
  EXPECT_NEAR(p[0], 189.476, 1e-3);  // given to three decimals
  EXPECT_NEAR(p[1], 411.771, 1e-3);
}

TEST(Camera, ChromaMatrixHalvesTheGeometry) {
  const Mat3 m = WarpMatrix(CameraIntrinsics(DeviceType::kTici, CameraRole::kRoad),
                            ModelIntrinsics(ModelFrame::kMedmodel), {0.01, 0.02, -0.01});
  const Mat3 uv = ChromaMatrix(m);
  // A chroma pixel (x, y) is the luma pixel (2x, 2y); its camera position halves.
  for (auto [x, y] : {std::pair<double, double>{0, 0}, {255, 127}, {100.5, 30.25}}) {
    const auto luma = Project(m, 2 * x, 2 * y);
    const auto chroma = Project(uv, x, y);
    EXPECT_NEAR(chroma[0], luma[0] / 2, 1e-9);
    EXPECT_NEAR(chroma[1], luma[1] / 2, 1e-9);
  }
  // S·M·S⁻¹ with S = diag(.5,.5,1): the translation halves, the projective row doubles.
  EXPECT_DOUBLE_EQ(uv[0][0], m[0][0]);
  EXPECT_DOUBLE_EQ(uv[0][2], m[0][2] / 2);
  EXPECT_DOUBLE_EQ(uv[2][0], m[2][0] * 2);
  EXPECT_DOUBLE_EQ(uv[2][2], m[2][2]);
}

TEST(Camera, InverseAndSingularMatrices) {
  const Mat3 m = WarpMatrix(CameraIntrinsics(DeviceType::kMici, CameraRole::kWide),
                            ModelIntrinsics(ModelFrame::kSbigmodel), {0.1, -0.05, 0.2});
  auto inv = Inverse(m);
  ASSERT_TRUE(inv.ok());
  ExpectMatNear(Multiply(m, *inv), Identity(), 1e-12, "M·M⁻¹");
  auto singular = Inverse({{{1, 2, 3}, {2, 4, 6}, {0, 0, 1}}});
  EXPECT_FALSE(singular.ok());
}

TEST(Parse, Rpy) {
  auto a = ParseRpy("0,0.02,-0.01");
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  EXPECT_EQ(a->roll, 0.0);
  EXPECT_EQ(a->pitch, 0.02);
  EXPECT_EQ(a->yaw, -0.01);
  auto b = ParseRpy(" 1e-3 , +0.5,-2 ");
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  EXPECT_EQ(b->roll, 1e-3);
  EXPECT_EQ(b->pitch, 0.5);
  EXPECT_EQ(b->yaw, -2.0);
  auto round = ParseRpy(FormatRpy(*a));
  ASSERT_TRUE(round.ok());
  EXPECT_EQ(round->pitch, a->pitch);
  for (const char *bad : {"", "0,0", "0,0,0,0", "a,b,c", "0,,0", "0;0;0", "0,0.02,-0.01x",
                          "nan,0,0", "inf,0,0", "0,0,1e999", "0,0,", ",0,0", "0 0 0"}) {
    auto r = ParseRpy(bad);
    ASSERT_FALSE(r.ok()) << "accepted \"" << bad << "\"";
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(r.status().message().find(std::string("\"") + bad + "\""), std::string::npos)
        << r.status().message();
  }
}

TEST(Parse, Intrinsics) {
  auto a = ParseIntrinsics("2648,2648,964,604");
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->fx, 2648.0);
  EXPECT_EQ(a->cy, 604.0);
  auto b = ParseIntrinsics("500.5, 501.25, 320, 240.5");
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(b->fy, 501.25);
  EXPECT_EQ(b->cy, 240.5);
  for (const char *bad :
       {"", "1,2,3", "1,2,3,4,5", "0,1,2,3", "1,-1,2,3", "x,1,2,3", "1,1,2,3 4"}) {
    auto r = ParseIntrinsics(bad);
    ASSERT_FALSE(r.ok()) << "accepted \"" << bad << "\"";
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(r.status().message().find(std::string("\"") + bad + "\""), std::string::npos)
        << r.status().message();
  }
}
