#include "nn/executor.h"

#include <chrono>
#include <cstring>
#include <set>
#include <random>

#include "cl/program_cache.h"

namespace op::nn {

struct Executor::Launch {
  cl::KernelHandle kernel;
  cl_uint dims = 1;
  size_t global[3] = {1, 1, 1};
  size_t local[3] = {1, 1, 1};
  bool has_local = false;
};

// A kernel argument set per run: the cl_mem of an input or an output.
struct Executor::Binding {
  size_t launch;
  cl_uint arg;
  bool output;
  uint32_t index;
};

Executor::~Executor() = default;

StatusOr<std::unique_ptr<Executor>> Executor::Create(std::shared_ptr<cl::Device> device,
                                                     CompiledModel model,
                                                     const cl::BuildProgress &progress) {
  OP_RETURN_IF_ERROR(ValidateModel(model));
  std::unique_ptr<Executor> e(new Executor());
  e->device_ = std::move(device);
  e->model_ = std::move(model);
  OP_RETURN_IF_ERROR(e->Load(progress));
  return e;
}

namespace {

std::string ArgTypeName(cl_kernel k, cl_uint i) {
  size_t n = 0;
  if (clGetKernelArgInfo(k, i, CL_KERNEL_ARG_TYPE_NAME, 0, nullptr, &n) != CL_SUCCESS || !n)
    return {};
  std::string s(n, '\0');
  clGetKernelArgInfo(k, i, CL_KERNEL_ARG_TYPE_NAME, n, s.data(), nullptr);
  while (!s.empty() && s.back() == '\0')
    s.pop_back();
  return s;
}

// Checks that argument `i` of `k` is what the model says it is (when the driver reports
// argument info): a global pointer for buffers, a uint offset after it, an image, or a scalar.
Status CheckArg(cl_kernel k, cl_uint i, const char *want, const std::string &where) {
  cl_kernel_arg_address_qualifier aq = 0;
  cl_int err = clGetKernelArgInfo(k, i, CL_KERNEL_ARG_ADDRESS_QUALIFIER, sizeof(aq), &aq, nullptr);
  if (err == CL_KERNEL_ARG_INFO_NOT_AVAILABLE)
    return Status::Ok();
  if (err != CL_SUCCESS)
    return cl::ClError("clGetKernelArgInfo", err).Prepend(where);
  std::string type = ArgTypeName(k, i);
  bool ok = true;
  if (!std::strcmp(want, "buffer"))
    ok = aq == CL_KERNEL_ARG_ADDRESS_GLOBAL || aq == CL_KERNEL_ARG_ADDRESS_CONSTANT;
  else if (!std::strcmp(want, "image"))
    ok = type.find("image2d_t") != std::string::npos;
  else
    ok = aq == CL_KERNEL_ARG_ADDRESS_PRIVATE && type == want;
  if (!ok)
    return Corrupt(where + " argument " + std::to_string(i) + " is '" + type +
                   "', the model says " + want);
  return Status::Ok();
}

}  // namespace

namespace {
double NowMs() {
  return std::chrono::duration<double, std::milli>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}
}  // namespace

Status Executor::Load(const cl::BuildProgress &progress) {
  const CompiledModel &m = model_;
  double t0 = NowMs();
  const cl::Capabilities &caps = device_->caps();
  if (m.arena_bytes > caps.max_alloc_bytes)
    return Unsupported("the arena of " + std::to_string(m.arena_bytes) +
                       " bytes exceeds the device's largest allocation (" +
                       std::to_string(caps.max_alloc_bytes) + ")");
  cl_int err = CL_SUCCESS;
  // Never an empty buffer: a model without weights or intermediates still binds something.
  std::vector<uint8_t> pad;
  const void *wdata = m.weights.data();
  size_t wbytes = m.weights.size();
  if (!wbytes) {
    pad.assign(m.alignment, 0);
    wdata = pad.data();
    wbytes = pad.size();
  }
  // Where host and device share memory the device reads the weights where the model holds them
  // (a file's bytes, read once): no copy of tens of megabytes at start (PoCL: 28 ms of a warm
  // start of the full-size vision model). model_ outlives weights_ and is never written.
  const cl_mem_flags placement =
      caps.unified_memory && pad.empty() ? CL_MEM_USE_HOST_PTR : CL_MEM_COPY_HOST_PTR;
  weights_ = cl::MemHandle(clCreateBuffer(device_->context(), CL_MEM_READ_ONLY | placement, wbytes,
                                          const_cast<void *>(wdata), &err));
  if (err != CL_SUCCESS)
    return cl::ClError("clCreateBuffer(weights)", err);
  OP_ASSIGN_OR_RETURN(arena_,
                      device_->CreateBuffer(std::max<uint64_t>(m.arena_bytes, m.alignment)));

  for (const WeightImage &wi : m.images) {
    if (!caps.images)
      return Unsupported("the model reads weights from images; the device has no image support");
    cl_image_format fmt{CL_RGBA, static_cast<cl_channel_type>(wi.half ? CL_HALF_FLOAT : CL_FLOAT)};
    cl_image_desc desc{};
    desc.image_type = CL_MEM_OBJECT_IMAGE2D;
    desc.image_width = wi.width;
    desc.image_height = wi.height;
    images_.emplace_back(clCreateImage(device_->context(), CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR,
                                       &fmt, &desc,
                                       const_cast<uint8_t *>(m.weights.data() + wi.offset), &err));
    if (err != CL_SUCCESS)
      return cl::ClError("clCreateImage(weights)", err);
  }

  double t1 = NowMs();
  load_times_.buffers_ms = t1 - t0;
  // Every kernel first: the distinct programs compiled in parallel and linked into one
  // (kernels sharing a source and options share one object). Argument info lets the loader
  // check every argument against the model.
  constexpr char kArgInfo[] = "-cl-kernel-arg-info";
  // Float division and square roots as IEEE 754 rounds them, where the device can: ONNX's Div,
  // Resize's source coordinates, DynamicQuantizeLinear's scale and our tanh assume it. OpenCL
  // C lets a driver divide within 2.5 ulps otherwise, and NVIDIA's does: there tanh came out
  // 1.99 ulps off, nearest-neighbour Resize took the neighbouring pixel at 8 of 56 points of
  // ONNX's test, and DynamicQuantizeLinear's scale was one ulp from onnxruntime's. PoCL divides
  // exactly either way. The option is the device's business, not the compiled model's.
  const std::string common = device_->caps().exact_divide_sqrt
                                 ? std::string(kArgInfo) + " -cl-fp32-correctly-rounded-divide-sqrt"
                                 : std::string(kArgInfo);
  std::vector<cl::KernelRequest> requests(m.kernels.size());
  for (size_t k = 0; k < m.kernels.size(); k++) {
    const KernelDesc &kd = m.kernels[k];
    requests[k] = {m.sources[kd.source], kd.options.empty() ? common : kd.options + " " + common,
                   kd.label, kd.entry};
  }
  OP_ASSIGN_OR_RETURN(std::vector<cl::KernelHandle> kernels,
                      device_->programs().BuildKernels(requests, kArgInfo, progress));
  double t2 = NowMs();
  load_times_.programs_ms = t2 - t1;
  {
    std::set<cl_program> distinct;
    for (const cl::KernelHandle &kh : kernels) {
      cl_program p = nullptr;
      OP_CL_CHECK(clGetKernelInfo(kh.get(), CL_KERNEL_PROGRAM, sizeof(p), &p, nullptr));
      distinct.insert(p);
    }
    load_times_.programs = distinct.size();
  }
  launches_.resize(m.kernels.size());
  for (size_t k = 0; k < m.kernels.size(); k++) {
    const KernelDesc &kd = m.kernels[k];
    std::string where = "kernel " + std::to_string(k) + " (" + kd.label + ")";
    Launch &l = launches_[k];
    l.kernel = std::move(kernels[k]);
    cl_kernel kern = l.kernel.get();
    cl_uint want = 0;
    for (const KernelArg &a : kd.args)
      want += a.kind == KernelArg::Kind::kBuffer ? 2 : 1;
    cl_uint have = 0;
    OP_CL_CHECK(clGetKernelInfo(kern, CL_KERNEL_NUM_ARGS, sizeof(have), &have, nullptr));
    if (have != want)
      return Corrupt(where + " takes " + std::to_string(have) + " arguments, the model gives " +
                     std::to_string(want));
    cl_uint i = 0;
    for (const KernelArg &a : kd.args) {
      switch (a.kind) {
        case KernelArg::Kind::kBuffer: {
          OP_RETURN_IF_ERROR(CheckArg(kern, i, "buffer", where));
          OP_RETURN_IF_ERROR(CheckArg(kern, i + 1, "uint", where));
          cl_uint off = static_cast<cl_uint>(a.buffer.offset / a.buffer.element_bytes);
          switch (a.buffer.kind) {
            case BufferKind::kArena:
            case BufferKind::kWeights: {
              cl_mem mem = a.buffer.kind == BufferKind::kArena ? arena_.get() : weights_.get();
              OP_CL_CHECK(clSetKernelArg(kern, i, sizeof(mem), &mem));
              break;
            }
            case BufferKind::kInput:
            case BufferKind::kOutput:
              bindings_.push_back({k, i, a.buffer.kind == BufferKind::kOutput, a.buffer.index});
              break;
          }
          cl_int e2 = clSetKernelArg(kern, i + 1, sizeof(off), &off);
          if (e2 != CL_SUCCESS)
            return cl::ClError("clSetKernelArg", e2).Prepend(where);
          i += 2;
          break;
        }
        case KernelArg::Kind::kInt32: {
          OP_RETURN_IF_ERROR(CheckArg(kern, i, "int", where));
          OP_CL_CHECK(clSetKernelArg(kern, i, sizeof(a.i), &a.i));
          i++;
          break;
        }
        case KernelArg::Kind::kFloat32: {
          OP_RETURN_IF_ERROR(CheckArg(kern, i, "float", where));
          OP_CL_CHECK(clSetKernelArg(kern, i, sizeof(a.f), &a.f));
          i++;
          break;
        }
        case KernelArg::Kind::kImage: {
          OP_RETURN_IF_ERROR(CheckArg(kern, i, "image", where));
          cl_mem img = images_[a.image].get();
          OP_CL_CHECK(clSetKernelArg(kern, i, sizeof(img), &img));
          i++;
          break;
        }
      }
    }
    l.dims = static_cast<cl_uint>(kd.global.size());
    for (size_t d = 0; d < kd.global.size(); d++)
      l.global[d] = kd.global[d];
    l.has_local = !kd.local.empty();
    for (size_t d = 0; d < kd.local.size(); d++)
      l.local[d] = std::min<size_t>(kd.local[d], caps.max_work_item_sizes[d]);
    if (l.has_local) {
      size_t total = 1;
      for (size_t d = 0; d < kd.local.size(); d++) {
        total *= l.local[d];
        if (l.global[d] % l.local[d] != 0)
          l.has_local = false;  // the device's limit broke divisibility: let the driver choose
      }
      if (total > caps.max_work_group_size)
        l.has_local = false;
    }
  }
  load_times_.kernels_ms = NowMs() - t2;
  return Status::Ok();
}

StatusOr<cl::EventHandle> Executor::Run(cl::Queue &queue, const cl_mem *inputs, size_t num_inputs,
                                        const cl_mem *outputs, size_t num_outputs,
                                        const cl::EventList &wait,
                                        std::vector<cl::EventHandle> *launch_events,
                                        cl::EventHandle *first_launch) {
  if (num_inputs != model_.inputs.size() || num_outputs != model_.outputs.size())
    return InvalidArgument("the model takes " + std::to_string(model_.inputs.size()) +
                           " inputs and " + std::to_string(model_.outputs.size()) +
                           " outputs, got " + std::to_string(num_inputs) + " and " +
                           std::to_string(num_outputs));
  auto check = [](cl_mem mem, const TensorDesc &t, const char *what) -> Status {
    size_t size = 0;
    if (!mem || clGetMemObjectInfo(mem, CL_MEM_SIZE, sizeof(size), &size, nullptr) != CL_SUCCESS)
      return InvalidArgument(std::string(what) + " '" + t.name + "' is not a valid cl_mem");
    if (size < t.ByteSize())
      return InvalidArgument(std::string(what) + " '" + t.name + "' buffer holds " +
                             std::to_string(size) + " bytes, the tensor needs " +
                             std::to_string(t.ByteSize()));
    return Status::Ok();
  };
  for (size_t i = 0; i < num_inputs; i++)
    OP_RETURN_IF_ERROR(check(inputs[i], model_.inputs[i], "input"));
  for (size_t i = 0; i < num_outputs; i++)
    OP_RETURN_IF_ERROR(check(outputs[i], model_.outputs[i], "output"));
  for (const Binding &b : bindings_) {
    cl_mem mem = b.output ? outputs[b.index] : inputs[b.index];
    OP_CL_CHECK(clSetKernelArg(launches_[b.launch].kernel.get(), b.arg, sizeof(mem), &mem));
  }
  if (launches_.empty())
    return queue.Marker(wait);
  // The queue is in order: only the first launch needs the caller's events.
  cl::EventHandle last;
  for (size_t k = 0; k < launches_.size(); k++) {
    const Launch &l = launches_[k];
    // Launches in the middle that no caller asked events for go without one (an event object
    // per launch is measurable on small networks).
    if (!launch_events && k + 1 < launches_.size() && !(first_launch && k == 0)) {
      OP_RETURN_IF_ERROR(queue.LaunchQuiet(l.kernel.get(), l.dims, l.global,
                                           l.has_local ? l.local : nullptr,
                                           k == 0 ? wait : cl::EventList{}));
      continue;
    }
    OP_ASSIGN_OR_RETURN(
        last, queue.Launch(l.kernel.get(), l.dims, l.global, l.has_local ? l.local : nullptr,
                           k == 0 ? wait : cl::EventList{}));
    if (launch_events)
      launch_events->push_back(last);
    if (first_launch && k == 0)
      *first_launch = last;
  }
  return last;
}

StatusOr<std::vector<Tensor>> Executor::RunHost(cl::Queue &queue,
                                                const std::vector<Tensor> &inputs) {
  const CompiledModel &m = model_;
  if (host_inputs_.empty()) {
    for (const TensorDesc &t : m.inputs) {
      OP_ASSIGN_OR_RETURN(cl::MemHandle h,
                          device_->CreateBuffer(std::max<uint64_t>(t.ByteSize(), 4)));
      host_inputs_.push_back(std::move(h));
    }
    for (const TensorDesc &t : m.outputs) {
      OP_ASSIGN_OR_RETURN(cl::MemHandle h,
                          device_->CreateBuffer(std::max<uint64_t>(t.ByteSize(), 4)));
      host_outputs_.push_back(std::move(h));
    }
  }
  for (const Tensor &t : inputs) {
    bool known = false;
    for (const TensorDesc &d : m.inputs)
      known = known || d.name == t.name;
    if (!known)
      return InvalidArgument("the model has no input '" + t.name + "'");
  }
  std::vector<cl::EventHandle> writes;
  cl::EventList wait;
  for (size_t i = 0; i < m.inputs.size(); i++) {
    const TensorDesc &d = m.inputs[i];
    const Tensor *found = nullptr;
    for (const Tensor &t : inputs)
      if (t.name == d.name)
        found = &t;
    if (!found)
      return InvalidArgument("no value for input '" + d.name + "'");
    if (found->dtype != d.dtype || found->shape.dims != d.dims)
      return InvalidArgument("input '" + d.name + "' is " + DTypeName(found->dtype) + " " +
                             found->shape.ToString() + ", the model takes " + DTypeName(d.dtype) +
                             " " + Shape(d.dims).ToString());
    if (!found->data || found->data->size() != d.ByteSize())
      return InvalidArgument("input '" + d.name + "' has " +
                             std::to_string(found->data ? found->data->size() : 0) +
                             " bytes, expected " + std::to_string(d.ByteSize()));
    if (d.ByteSize() == 0)
      continue;
    OP_ASSIGN_OR_RETURN(cl::EventHandle ev,
                        queue.Write(host_inputs_[i].get(), 0, d.ByteSize(), found->data->data()));
    wait.Add(ev.get());
    writes.push_back(std::move(ev));
  }
  std::vector<cl_mem> in_mems, out_mems;
  for (auto &h : host_inputs_)
    in_mems.push_back(h.get());
  for (auto &h : host_outputs_)
    out_mems.push_back(h.get());
  OP_ASSIGN_OR_RETURN(cl::EventHandle done, Run(queue, in_mems.data(), in_mems.size(),
                                                out_mems.data(), out_mems.size(), wait));
  std::vector<Tensor> outs;
  for (size_t j = 0; j < m.outputs.size(); j++) {
    const TensorDesc &d = m.outputs[j];
    auto bytes = std::make_shared<Bytes>(d.ByteSize());
    if (d.ByteSize()) {
      OP_ASSIGN_OR_RETURN(cl::EventHandle rd, queue.Read(host_outputs_[j].get(), 0, d.ByteSize(),
                                                         bytes->data(), {done.get()}));
      // A host convenience: waiting here is its purpose.
      OP_RETURN_IF_ERROR(cl::WaitForEvent(rd.get()).Prepend("reading output '" + d.name + "'"));
    }
    outs.push_back(MakeConstant(d.dtype, Shape(d.dims), std::move(*bytes)));
    outs.back().name = d.name;
  }
  OP_RETURN_IF_ERROR(cl::WaitForEvent(done.get()).Prepend("running the model"));
  return outs;
}

std::vector<uint8_t> RandomInputBytes(const TensorDesc &t, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<uint8_t> bytes(t.ByteSize());
  if (t.dtype == DType::kFloat32) {
    std::normal_distribution<float> dist(0.f, 1.f);
    for (size_t i = 0; i + 4 <= bytes.size(); i += 4) {
      const float f = dist(rng);
      std::memcpy(&bytes[i], &f, 4);
    }
  } else {
    for (auto &b : bytes)
      b = static_cast<uint8_t>(rng());
  }
  return bytes;
}

}  // namespace op::nn
