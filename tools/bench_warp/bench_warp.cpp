// Time per 1928×1208 NV12 frame of the warp (Y + U + V, for both model frames: img with the road
// camera and medmodel, big_img with the wide camera and sbigmodel), ours on an OpenCL device
// against OpenCV's warpPerspective on the CPU:
//   op-bench-warp [--device SPEC] [--iterations N] [--threads N]
// OpenCV runs nearest-neighbour with the inverse map and a replicated border on the Y plane and
// on the interleaved UV plane as one two-channel image, with as many threads as the device has
// compute units (PoCL's CPU device uses every core). Runs alternate between the two so that
// frequency changes and other load hit both alike. The frame is already in device memory, as a
// camera frame in the pipeline is; our time includes enqueueing and waiting for completion.
#include <opencv2/core.hpp>
#include <opencv2/imgproc.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "cl/device.h"
#include "cl/queue.h"
#include "drive/warp.h"

using namespace op;
using namespace op::drive;

namespace {

using Clock = std::chrono::steady_clock;

double Ms(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}

struct Stats {
  double median, p90;
};
Stats Summarise(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return {v[v.size() / 2], v[std::min(v.size() - 1, v.size() * 9 / 10)]};
}

cv::Mat ToCv(const Mat3 &m) {
  cv::Mat r(3, 3, CV_64F);
  for (int i = 0; i < 3; i++)
    for (int j = 0; j < 3; j++)
      r.at<double>(i, j) = m[i][j];
  return r;
}

int Fail(const Status &s) {
  std::fprintf(stderr, "op-bench-warp: %s\n", s.ToString().c_str());
  return 1;
}

}  // namespace

int main(int argc, char **argv) {
  std::string spec = "auto";
  int iterations = 200, threads = 0;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--device"))
      spec = argv[i + 1];
    else if (!std::strcmp(argv[i], "--iterations"))
      iterations = std::max(1, std::atoi(argv[i + 1]));
    else if (!std::strcmp(argv[i], "--threads"))
      threads = std::atoi(argv[i + 1]);
  }

  auto device = cl::Device::Open(spec);
  if (!device.ok())
    return Fail(device.status());
  auto queue = cl::Queue::Create(**device, /*profiling=*/true);
  if (!queue.ok())
    return Fail(queue.status());
  if (threads <= 0)
    threads = int((*device)->caps().compute_units);
  cv::setNumThreads(threads);

  const int w = 1928, h = 1208;
  const Nv12Layout layout = Nv12Layout::Camera(w, h);
  std::vector<uint8_t> frame(layout.MinBytes());
  std::mt19937 rng(1);
  for (auto &b : frame)
    b = uint8_t(rng());

  const Mat3 m_road = WarpMatrix(CameraIntrinsics(DeviceType::kTici, CameraRole::kRoad),
                                 ModelIntrinsics(ModelFrame::kMedmodel), {0, 0.02, -0.01});
  const Mat3 m_wide = WarpMatrix(CameraIntrinsics(DeviceType::kTici, CameraRole::kWide),
                                 ModelIntrinsics(ModelFrame::kSbigmodel), {0, 0.02, -0.01});

  // Ours: two warpers (one per model input), each with its own history, as two opwarp elements.
  auto road = Warper::Create(*device, *queue, layout);
  auto wide = Warper::Create(*device, *queue, layout);
  if (!road.ok())
    return Fail(road.status());
  if (!wide.ok())
    return Fail(wide.status());
  (*road)->SetMatrix(m_road);
  (*wide)->SetMatrix(m_wide);
  auto src = (*device)->CreateBuffer(frame.size());
  auto out_road = (*device)->CreateBuffer(kModelInputBytes);
  auto out_wide = (*device)->CreateBuffer(kModelInputBytes);
  if (!src.ok() || !out_road.ok() || !out_wide.ok())
    return Fail(Internal("allocation failed"));
  auto up = queue->Write(src->get(), 0, frame.size(), frame.data());
  if (!up.ok())
    return Fail(up.status());
  if (Status s = cl::WaitForEvent(up->get()); !s.ok())
    return Fail(s);

  // Whole element work (warp + history copies) or the warp alone (what OpenCV does).
  std::vector<double> t_kernel;  // device time of the two warp kernels, from profiling events
  auto run_ours = [&](bool history) -> Status {
    cl::EventHandle a, b;
    if (history) {
      OP_ASSIGN_OR_RETURN(a, (*road)->Process(src->get(), out_road->get(), 0, {}));
      OP_ASSIGN_OR_RETURN(b, (*wide)->Process(src->get(), out_wide->get(), 0, {}));
    } else {
      OP_ASSIGN_OR_RETURN(a, (*road)->WarpOnce(src->get(), out_road->get(), 0, {}));
      OP_ASSIGN_OR_RETURN(b, (*wide)->WarpOnce(src->get(), out_wide->get(), 0, {}));
    }
    OP_RETURN_IF_ERROR(cl::WaitForEvents({a.get(), b.get()}));
    if (!history)
      t_kernel.push_back(1e-6 *
                         double(cl::EventDurationNs(a.get()) + cl::EventDurationNs(b.get())));
    return Status::Ok();
  };

  // OpenCV views the same host frame: Y as 8UC1, UV as 8UC2, with the camera strides.
  cv::Mat y_plane(h, w, CV_8UC1, frame.data() + layout.y_offset, layout.y_stride);
  cv::Mat uv_plane(h / 2, w / 2, CV_8UC2, frame.data() + layout.uv_offset, layout.uv_stride);
  const cv::Mat cv_road = ToCv(m_road), cv_wide = ToCv(m_wide);
  const cv::Mat cv_road_uv = ToCv(ChromaMatrix(m_road)), cv_wide_uv = ToCv(ChromaMatrix(m_wide));
  cv::Mat y_out[2], uv_out[2];
  const int flags = cv::INTER_NEAREST | cv::WARP_INVERSE_MAP;
  auto run_cv = [&]() {
    cv::warpPerspective(y_plane, y_out[0], cv_road, {kModelWidth, kModelHeight}, flags,
                        cv::BORDER_REPLICATE);
    cv::warpPerspective(uv_plane, uv_out[0], cv_road_uv, {kPlaneCols, kPlaneRows}, flags,
                        cv::BORDER_REPLICATE);
    cv::warpPerspective(y_plane, y_out[1], cv_wide, {kModelWidth, kModelHeight}, flags,
                        cv::BORDER_REPLICATE);
    cv::warpPerspective(uv_plane, uv_out[1], cv_wide_uv, {kPlaneCols, kPlaneRows}, flags,
                        cv::BORDER_REPLICATE);
  };

  for (int i = 0; i < 10; i++) {  // warm-up: first launches, page faults, thread pools
    if (Status s = run_ours(true); !s.ok())
      return Fail(s);
    if (Status s = run_ours(false); !s.ok())
      return Fail(s);
    run_cv();
  }
  std::vector<double> t_full, t_warp, t_cv;
  t_kernel.clear();
  for (int i = 0; i < iterations; i++) {
    // Rotate the order each round so no contender always runs right after another.
    for (int k = 0; k < 3; k++) {
      const int which = (i + k) % 3;
      const auto t0 = Clock::now();
      if (which == 0) {
        if (Status s = run_ours(true); !s.ok())
          return Fail(s);
      } else if (which == 1) {
        if (Status s = run_ours(false); !s.ok())
          return Fail(s);
      } else {
        run_cv();
      }
      const double ms = Ms(t0, Clock::now());
      (which == 0 ? t_full : which == 1 ? t_warp : t_cv).push_back(ms);
    }
  }

  // How often OpenCV's nearest pick equals ours (its rounding is fixed-point, not half-even).
  std::vector<uint8_t> ours(kFrameTensorBytes);
  auto once = (*road)->WarpOnce(src->get(), out_road->get(), 0, {});
  if (!once.ok())
    return Fail(once.status());
  auto rd = queue->Read(out_road->get(), 0, ours.size(), ours.data(), {once->get()});
  if (!rd.ok())
    return Fail(rd.status());
  if (Status s = cl::WaitForEvent(rd->get()); !s.ok())
    return Fail(s);
  size_t same = 0;
  for (int y = 0; y < kModelHeight; y++)
    for (int x = 0; x < kModelWidth; x++)
      same += ours[((y & 1) + 2 * (x & 1)) * kPlaneBytes + (y / 2) * kPlaneCols + x / 2] ==
              y_out[0].at<uint8_t>(y, x);

  const Stats full = Summarise(t_full), warp = Summarise(t_warp), cv = Summarise(t_cv);
  const Stats kernel = Summarise(t_kernel);
  std::printf("device: %s\n", (*device)->caps().Describe().c_str());
  std::printf("opencv: %s, %d threads\n", CV_VERSION, cv::getNumThreads());
  std::printf(
      "frame: %dx%d NV12 (stride %zu, UV offset %zu); per frame: img (road, medmodel) + "
      "big_img (wide, sbigmodel), Y + U + V; %d interleaved runs each\n",
      w, h, layout.y_stride, layout.uv_offset, iterations);
  std::printf("%-34s median %7.3f ms   p90 %7.3f ms\n", "ours: warp + 5-frame history", full.median,
              full.p90);
  std::printf("%-34s median %7.3f ms   p90 %7.3f ms\n", "ours: warp only", warp.median, warp.p90);
  std::printf("%-34s median %7.3f ms   p90 %7.3f ms\n", "ours: warp kernels (device time)",
              kernel.median, kernel.p90);
  std::printf("%-34s median %7.3f ms   p90 %7.3f ms\n", "opencv warpPerspective (nearest)",
              cv.median, cv.p90);
  const double ratio = cv.median / warp.median;
  std::printf("ratio (median, warp only): ours is %.2fx %s than OpenCV\n",
              ratio >= 1 ? ratio : 1 / ratio, ratio >= 1 ? "faster" : "slower");
  std::printf("luma pixels equal to OpenCV's pick (img): %.3f%%\n",
              100.0 * double(same) / (kModelWidth * kModelHeight));
  return 0;
}
