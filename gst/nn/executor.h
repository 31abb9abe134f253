// The executor: runs a compiled model on one OpenCL device.
//
// Load time (Create): validates the model, builds its programs through the device's
// ProgramCache (binaries on disk; the distinct programs in parallel on the build thread pool,
// with `progress` called as each is ready), creates every kernel, checks each kernel's argument
// count and kinds against the model, uploads the weights once, allocates the arena, and sets every
// argument that does not change between runs.
//
// Run time (Run): binds the caller's input and output cl_mems (whole buffers, element offsets
// 0), enqueues the launch list with the first launch waiting on `wait`, and returns the event of
// the last launch. No allocation, compilation or host wait. Kernel arguments are executor
// state, so one Run at a time per executor (Run is not reentrant; use one executor per
// thread). The queue must be in order.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "cl/device.h"
#include "cl/program_cache.h"
#include "cl/queue.h"
#include "nn/graph.h"
#include "nn/model_file.h"

namespace op::nn {

class Executor {
 public:
  static StatusOr<std::unique_ptr<Executor>> Create(std::shared_ptr<cl::Device> device,
                                                    CompiledModel model,
                                                    const cl::BuildProgress &progress = {});
  ~Executor();
  Executor(const Executor &) = delete;
  Executor &operator=(const Executor &) = delete;

  const CompiledModel &model() const { return model_; }

  // Where Create spent its time, in milliseconds of wall time (for `opc profile` and start-up
  // measurements): weight upload and buffer allocation, building or loading the programs, and
  // creating and checking the kernels. `programs` is the number of programs the kernels came from
  // (one where the driver links: cl::ProgramCache::BuildKernels).
  struct LoadTimes {
    double buffers_ms = 0, programs_ms = 0, kernels_ms = 0;
    size_t programs = 0;
  };
  const LoadTimes &load_times() const { return load_times_; }
  cl::Device &device() { return *device_; }

  // Enqueues one run. `inputs` and `outputs` hold one cl_mem per model input/output, each at
  // least that tensor's bytes (checked). Returns the completion event. With `launch_events`
  // (profiling tools), the event of every launch is appended to it, in model order; with
  // `first_launch`, the first launch's event is stored there (its start and the completion
  // event's end bound the run's device time on a profiling queue).
  StatusOr<cl::EventHandle> Run(cl::Queue &queue, const cl_mem *inputs, size_t num_inputs,
                                const cl_mem *outputs, size_t num_outputs,
                                const cl::EventList &wait = {},
                                std::vector<cl::EventHandle> *launch_events = nullptr,
                                cl::EventHandle *first_launch = nullptr);

  // Host convenience for tools and tests: uploads `inputs` (matched by name; dtype and shape
  // must match the model's), runs, waits and returns the outputs as constant-style tensors in
  // model order. The device buffers for this path are created on the first call and reused.
  StatusOr<std::vector<Tensor>> RunHost(cl::Queue &queue, const std::vector<Tensor> &inputs);

 private:
  struct Launch;
  struct Binding;
  Executor() = default;
  Status Load(const cl::BuildProgress &progress);

  std::shared_ptr<cl::Device> device_;
  CompiledModel model_;  // before weights_: a unified-memory device reads its weights in place
  cl::MemHandle weights_;
  cl::MemHandle arena_;
  std::vector<cl::MemHandle> images_;
  std::vector<Launch> launches_;
  std::vector<Binding> bindings_;
  std::vector<cl::MemHandle> host_inputs_, host_outputs_;
  LoadTimes load_times_;
};

// Bytes of a random value for input `t` (standard normal float32s; other types random bytes),
// for tools that time or profile a model without real data. Deterministic for a seed.
std::vector<uint8_t> RandomInputBytes(const TensorDesc &t, uint32_t seed);

}  // namespace op::nn
