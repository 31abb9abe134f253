// The warp on the device: NV12 frames in, openpilot model-input tensors (1,12,128,256) out.
//
// A Warper is built once per frame layout with everything the frame path needs (program,
// kernel, the 5-frame history buffer); per frame it only sets kernel arguments and enqueues a
// launch and two copies, waiting on events instead of the host. It belongs to one thread at a
// time (kernel arguments are per kernel object) and needs an in-order queue, which orders the
// copies of a slot before the warp that later overwrites it.
#pragma once

#include <cstdint>
#include <memory>

#include "cl/device.h"
#include "cl/queue.h"
#include "drive/warp_reference.h"

namespace op::drive {

// Frames of history each camera keeps; the model sees the oldest and the newest.
constexpr int kHistoryFrames = 5;
// One model input: frame t−4 then frame t, (1, 12, 128, 256) uint8.
constexpr size_t kModelInputBytes = 2 * kFrameTensorBytes;

// Output columns one work item handles with vector arithmetic: 16 on CPUs (SIMD through the
// compiler), 4 elsewhere. Any of 1, 2, 4, 8, 16 gives the same bytes.
int WarpVectorWidth(const cl::Device &device);
// Build options of the warp program on `device`: the vector width, contraction off (no
// -cl-mad-enable), and division correctly rounded when the device offers it (otherwise the
// kernels may differ from the reference by one pixel where a coordinate lands on a rounding
// boundary). `vector_width` 0 means WarpVectorWidth(device).
std::string WarpBuildOptions(const cl::Device &device, int vector_width = 0);
// Whether `device` rounds float32 division correctly with WarpBuildOptions (bit-exactness).
bool WarpIsBitExact(const cl::Device &device);
// Builds (or loads from the binary cache) the program Warper::Create takes, with the default
// vector width, into the device's program cache: an element starts it beside the networks'
// loads, so that its warper, made when the first frame's caps arrive, finds it ready instead of
// building it then, after the networks, on the way to the first message.
Status PrebuildWarpProgram(cl::Device &device);

class Warper {
 public:
  // Validates the layout, builds the kernels and allocates the history, zeroed on `queue`.
  // `vector_width` 0 chooses WarpVectorWidth(device); tests force the others.
  static StatusOr<std::unique_ptr<Warper>> Create(std::shared_ptr<cl::Device> device,
                                                  cl::Queue queue, const Nv12Layout &layout,
                                                  int vector_width = 0);

  const Nv12Layout &layout() const { return layout_; }
  // Takes another layout of the same frame size for the following frames (a source that pads
  // differently, or a plane offset inside a larger buffer), keeping the history.
  Status SetLayout(const Nv12Layout &layout);
  // The matrix mapping model pixels to camera pixels (see WarpMatrix); rounded to float32 here,
  // used by every following frame. Until it is set the warp uses the identity.
  void SetMatrix(const Mat3 &m);
  const KernelMatrices &matrices() const { return matrices_; }

  // Warps `frame` (a buffer holding layout().MinBytes() bytes) into the next history slot, then
  // copies frame t−4 and frame t into `output` at `output_offset` (kModelInputBytes). Starts
  // after `wait`; returns the event after which the output is complete. `warp_event`, if given,
  // receives the warp kernel's own event (for stage timing).
  StatusOr<cl::EventHandle> Process(cl_mem frame, cl_mem output, size_t output_offset,
                                    const cl::EventList &wait,
                                    cl::EventHandle *warp_event = nullptr);

  // Warps `frame` into `dst` at `dst_offset` (kFrameTensorBytes) without touching the history.
  StatusOr<cl::EventHandle> WarpOnce(cl_mem frame, cl_mem dst, size_t dst_offset,
                                     const cl::EventList &wait);

  // Zeroes the history (after a flush or seek): the next four outputs have zeros for t−4.
  Status Reset();
  // Frames warped into the history since creation or the last Reset().
  uint64_t frames() const { return frames_; }

 private:
  Warper() = default;
  Status CheckSize(cl_mem mem, size_t needed, const char *what) const;
  StatusOr<cl::EventHandle> EnqueueWarp(cl_mem frame, cl_mem dst, size_t dst_offset,
                                        const cl::EventList &wait);

  std::shared_ptr<cl::Device> device_;
  cl::Queue queue_;
  Nv12Layout layout_;
  KernelMatrices matrices_{};
  cl::ProgramHandle program_;
  cl::KernelHandle kernel_;
  cl::MemHandle history_;   // kHistoryFrames slots of kFrameTensorBytes
  cl::EventHandle zeroed_;  // the Fill that cleared the history, until a warp has waited on it
  uint64_t frames_ = 0;
  int vector_width_ = 1;
};

}  // namespace op::drive
