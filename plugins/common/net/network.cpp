#include "common/net/network.h"

#include <set>

#include "nn/compiler.h"
#include "nn/executor.h"

namespace op::net {
namespace {

std::string DescribeTensor(const GstOpTensorDesc &t) {
  std::string s = gst_op_tensor_type_to_string(t.type);
  s += " (";
  for (size_t i = 0; i < t.dims.size(); i++)
    s += (i ? "," : "") + std::to_string(t.dims[i]);
  return s + ")";
}

}  // namespace

const char *PrecisionName(Precision p) {
  switch (p) {
    case Precision::kAuto:
      return "auto";
    case Precision::kFp32:
      return "fp32";
    case Precision::kFp16:
      return "fp16";
    case Precision::kInt8:
      return "int8";
  }
  return "unknown";
}

namespace {
std::string Dims(const GstOpTensorDesc &t) {
  std::string s = "(";
  for (size_t i = 0; i < t.dims.size(); i++)
    s += (i ? "," : "") + std::to_string(t.dims[i]);
  return s + ")";
}
}  // namespace

StatusOr<drive::TemporalShape> TemporalInputShape(const GstOpTensorInfo &inputs, int features,
                                                  int desire, int traffic, bool appends_hidden) {
  const GstOpTensorDesc &f = inputs.tensors[features];
  const GstOpTensorDesc &d = inputs.tensors[desire];
  const GstOpTensorDesc &t = inputs.tensors[traffic];
  for (const GstOpTensorDesc *x : {&f, &d, &t})
    if (x->type != GstOpTensorType::kFloat32)
      return InvalidArgument("model input \"" + x->name + "\" is not float32");
  if (f.dims.size() != 3 || f.dims[0] != 1 || d.dims.size() != 3 || d.dims[0] != 1 ||
      d.dims[1] != f.dims[1] || t.dims != std::vector<int64_t>{1, 2})
    return InvalidArgument("model inputs features_buffer " + Dims(f) + ", desire_pulse " + Dims(d) +
                           ", traffic_convention " + Dims(t) + " are not (1,S,W), (1,S,D), (1,2)");
  drive::TemporalShape shape;
  shape.steps = int(f.dims[1]);
  shape.width = int(f.dims[2]);
  shape.desire_width = int(d.dims[2]);
  // A separate policy network reads after this frame's hidden state was pushed; a combined
  // one appends it itself.
  shape.lag = appends_hidden ? shape.skip - 1 : 0;
  OP_RETURN_IF_ERROR(shape.Validate());
  return shape;
}

Status CheckInput(const GstOpTensorDesc &input, const GstOpTensorInfo &caps_info,
                  const std::string &pad_name) {
  // Upstream may call its tensor anything (opwarp names it after its role); a pad carrying one
  // tensor gives that tensor, a pad carrying several must name it.
  int i = caps_info.Find(input.name);
  if (i < 0 && caps_info.tensors.size() == 1)
    i = 0;
  if (i < 0) {
    std::string names;
    for (const GstOpTensorDesc &t : caps_info.tensors)
      names += (names.empty() ? "" : ", ") + t.name;
    return InvalidArgument("model input \"" + input.name + "\" is not among the tensors of pad " +
                           pad_name + " (" + names + ")");
  }
  const GstOpTensorDesc &got = caps_info.tensors[i];
  if (got.type != input.type || got.dims != input.dims)
    return InvalidArgument("model input \"" + input.name + "\" wants " + DescribeTensor(input) +
                           ", pad " + pad_name + " carries " + DescribeTensor(got));
  return Status::Ok();
}

StatusOr<GstOpTensorInfo> ConcatTensorInfo(const GstOpTensorInfo &first,
                                           const GstOpTensorInfo &second,
                                           const std::string &prefix) {
  GstOpTensorInfo out = first;
  // Slices written without a tensor name refer to the first tensor; make every one explicit
  // so that they keep meaning the same tensor after the concatenation.
  for (GstOpTensorSlice &s : out.slices)
    if (s.tensor.empty() && !out.tensors.empty())
      s.tensor = out.tensors.front().name;
  std::set<std::string> used;
  for (const GstOpTensorDesc &t : first.tensors)
    used.insert(t.name);
  for (const GstOpTensorDesc &t : second.tensors) {
    GstOpTensorDesc renamed = t;
    if (used.count(t.name))
      renamed.name = prefix + "_" + t.name;
    used.insert(renamed.name);
    for (const GstOpTensorSlice &s : second.slices) {
      const std::string &of = s.tensor.empty() ? second.tensors.front().name : s.tensor;
      if (of != t.name)
        continue;
      GstOpTensorSlice c = s;
      c.tensor = renamed.name;
      out.slices.push_back(c);
    }
    out.tensors.push_back(renamed);
  }
  Status valid = gst_op_tensor_info_validate(out);
  if (!valid.ok())
    return valid.Prepend("concatenating the vision and policy outputs");
  return out;
}

}  // namespace op::net

// ---- the network on gst/nn's executor ---------------------------------------------------

namespace op::net {
namespace {

StatusOr<GstOpTensorType> TypeOf(const nn::TensorDesc &t) {
  switch (t.dtype) {
    case nn::DType::kUInt8:
      return GstOpTensorType::kUint8;
    case nn::DType::kInt64:
      return GstOpTensorType::kInt64;
    case nn::DType::kFloat16:
      return GstOpTensorType::kFloat16;
    case nn::DType::kFloat32:
      return GstOpTensorType::kFloat32;
    default:
      return Unsupported("tensor \"" + t.name + "\" is of type " + nn::DTypeName(t.dtype) +
                         ", which tensor caps do not carry");
  }
}

StatusOr<GstOpTensorInfo> InfoOf(const std::vector<nn::TensorDesc> &tensors) {
  GstOpTensorInfo info;
  for (const nn::TensorDesc &t : tensors) {
    GstOpTensorDesc d;
    d.name = t.name;
    OP_ASSIGN_OR_RETURN(d.type, TypeOf(t));
    d.dims = t.dims;
    info.tensors.push_back(d);
    for (const nn::OutputSlice &s : t.slices)
      info.slices.push_back(GstOpTensorSlice{t.name, s.name, s.start, s.end});
  }
  Status valid = gst_op_tensor_info_validate(info);
  if (!valid.ok())
    return valid.Prepend("the model's tensors");
  return info;
}

// A load's failure, said once where: the loaders already start their messages with the file.
Status Loading(Status s, const std::string &path) {
  return s.message().rfind(path + ":", 0) == 0 ? s.Prepend("loading")
                                               : s.Prepend("loading " + path);
}

class NnNetwork : public Network {
 public:
  NnNetwork(std::unique_ptr<nn::Executor> exec, GstOpTensorInfo inputs, GstOpTensorInfo outputs,
            std::string description)
      : exec_(std::move(exec)),
        inputs_(std::move(inputs)),
        outputs_(std::move(outputs)),
        description_(std::move(description)) {}

  const GstOpTensorInfo &inputs() const override { return inputs_; }
  const GstOpTensorInfo &outputs() const override { return outputs_; }
  StatusOr<cl::EventHandle> Run(cl::Queue &queue, const cl_mem *inputs, const cl_mem *outputs,
                                const cl::EventList &wait, cl::EventHandle *first) override {
    return exec_->Run(queue, inputs, inputs_.tensors.size(), outputs, outputs_.tensors.size(), wait,
                      nullptr, first);
  }
  std::string Describe() const override { return description_; }

 private:
  std::unique_ptr<nn::Executor> exec_;
  GstOpTensorInfo inputs_, outputs_;
  std::string description_;
};

}  // namespace

StatusOr<std::unique_ptr<Network>> LoadNetwork(std::shared_ptr<cl::Device> device,
                                               const std::string &path, Precision precision,
                                               const cl::BuildProgress &progress) {
  nn::CompileOptions options;
  // auto: int8 for a quantized model, else half storage where the device computes in half, as
  // openpilot's networks are fp16.
  switch (precision) {
    case Precision::kAuto:
      options.precision = device->caps().fp16 ? nn::Precision::kFp16 : nn::Precision::kFp32;
      options.auto_precision = true;
      break;
    case Precision::kFp32:
      options.precision = nn::Precision::kFp32;
      break;
    case Precision::kFp16:
      options.precision = nn::Precision::kFp16;
      break;
    case Precision::kInt8:
      options.precision = nn::Precision::kInt8;
      break;
  }
  nn::LoadInfo load;
  auto model = nn::LoadOrCompile(path, *device, options, &load);
  if (!model.ok())
    return Loading(model.status(), path);
  GstOpTensorInfo in, out;
  {
    auto i = InfoOf(model->inputs);
    if (!i.ok())
      return Status(i.status()).Prepend(path);
    in = std::move(i).value();
    auto o = InfoOf(model->outputs);
    if (!o.ok())
      return Status(o.status()).Prepend(path);
    out = std::move(o).value();
  }
  std::string description = path + " (" + model->precision + ", " + model->profile + ", " +
                            (load.compiled     ? "compiled now"
                             : load.from_cache ? "from the cache"
                                               : "precompiled") +
                            ")";
  auto exec = nn::Executor::Create(std::move(device), std::move(model).value(), progress);
  if (!exec.ok())
    return Loading(exec.status(), path);
  return std::unique_ptr<Network>(new NnNetwork(std::move(exec).value(), std::move(in),
                                                std::move(out), std::move(description)));
}

}  // namespace op::net
