// What opvision and oppolicy need from the network runtime, and the checks between a model's
// tensors and the negotiated caps.
//
// The elements see a network only through this interface: its inputs and outputs as tensor
// descriptions (names, types, dims, output slices) and one Run per frame that binds the
// input/output buffers and enqueues the launch list behind a wait list, returning the completion
// event. LoadNetwork builds it on gst/nn's executor (ONNX compiled on first use and cached on
// disk, or a compiled .opm); see opnetwork.cpp.
#pragma once

#include <memory>
#include <string>

#include "cl/device.h"
#include "cl/queue.h"
#include "drive/temporal.h"
#include "op/gstoptensor.h"

namespace op::net {

// Precision asked of the compiler: auto = int8 for a quantized model, else fp16 where the device
// computes in half (cl_khr_fp16), else fp32; a compiled model (.opm) keeps its own. int8 needs a
// quantized model (QDQ or QLinear ops); a float model asked for int8 is an error.
enum class Precision { kAuto = 0, kFp32 = 1, kFp16 = 2, kInt8 = 3 };
const char *PrecisionName(Precision p);

class Network {
 public:
  virtual ~Network() = default;
  // Names, types, dims; outputs carry the model's output slices (as "outputs/pose:0:12").
  virtual const GstOpTensorInfo &inputs() const = 0;
  virtual const GstOpTensorInfo &outputs() const = 0;
  // One run: `inputs[i]` / `outputs[i]` hold tensor i of inputs() / outputs() at byte 0. Only
  // sets arguments and enqueues: no allocation, no compilation, no host wait. Returns the last
  // kernel's event; `first`, when given, receives the first kernel's (for device time).
  virtual StatusOr<cl::EventHandle> Run(cl::Queue &queue, const cl_mem *inputs,
                                        const cl_mem *outputs, const cl::EventList &wait,
                                        cl::EventHandle *first = nullptr) = 0;
  // The file it came from and what it was compiled for, for logs and the element's statistics.
  virtual std::string Describe() const = 0;
};

// Loads `path` (.onnx or .opm, decided by content) for `device`. Errors name the file.
// `progress` is called as each of the model's OpenCL programs is ready (see cl::BuildProgress).
StatusOr<std::unique_ptr<Network>> LoadNetwork(std::shared_ptr<cl::Device> device,
                                               const std::string &path, Precision precision,
                                               const cl::BuildProgress &progress = {});

// Checks that the negotiated tensors `caps_info` give the model input `input` (found by name
// in caps_info) with its exact type and dims. The message names the input, what the model
// wants and what the caps carry.
Status CheckInput(const GstOpTensorDesc &input, const GstOpTensorInfo &caps_info,
                  const std::string &pad_name);

// The temporal inputs of a policy or combined model, features_buffer (1,S,W), desire_pulse
// (1,S,D) and traffic_convention (1,2), all float32, at the given input indices, checked and
// turned into the shape of the queues that feed them. A combined network appends this frame's
// hidden state itself (`appends_hidden`), so its queues lag by skip − 1 frames.
StatusOr<drive::TemporalShape> TemporalInputShape(const GstOpTensorInfo &inputs, int features,
                                                  int desire, int traffic, bool appends_hidden);

// The output description of an element that emits `first` followed by the tensors of `second`
// (oppolicy: the vision outputs then the policy outputs). Tensor names must stay unique, so a
// name of `second` already used by `first` gets `prefix` in front ("policy_outputs"); its
// slices follow it. Fails when the result would still not be valid caps.
StatusOr<GstOpTensorInfo> ConcatTensorInfo(const GstOpTensorInfo &first,
                                           const GstOpTensorInfo &second,
                                           const std::string &prefix);

}  // namespace op::net
