#include "input_dump.h"

#include <cctype>
#include <cstdio>
#include <cstring>
#include <filesystem>

#include "nn/npy.h"

namespace op::net {

namespace {

nn::DType ToDType(GstOpTensorType t) {
  switch (t) {
    case GstOpTensorType::kUint8:
      return nn::DType::kUInt8;
    case GstOpTensorType::kInt64:
      return nn::DType::kInt64;
    case GstOpTensorType::kFloat16:
      return nn::DType::kFloat16;
    case GstOpTensorType::kFloat32:
      return nn::DType::kFloat32;
  }
  return nn::DType::kUndefined;
}

}  // namespace

std::string InputDumpFileName(const std::string &name, uint64_t frame) {
  std::string s;
  for (char c : name)
    s += (std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '.') ? c : '_';
  char num[32];
  std::snprintf(num, sizeof num, "-%06llu.npy", static_cast<unsigned long long>(frame));
  return (s.empty() ? std::string("input") : s) + num;
}

Status InputDump::Write(cl::Queue &queue, const GstOpTensorInfo &info, const cl_mem *inputs,
                        const cl::EventList &wait) {
  if (!enabled())
    return Status::Ok();
  std::error_code ec;
  std::filesystem::create_directories(dir_, ec);
  if (ec)
    return IoError("dump-inputs: cannot create " + dir_ + " (" + ec.message() + ")");
  for (size_t i = 0; i < info.tensors.size(); ++i) {
    const GstOpTensorDesc &desc = info.tensors[i];
    host_.resize(desc.bytes());
    // A blocking read: the debug mode waits for the inputs' writers (see the header).
    auto read = queue.Read(inputs[i], 0, host_.size(), host_.data(), wait);
    if (!read.ok())
      return Status(read.status()).Prepend("dump-inputs: input '" + desc.name + "'");
    Status st = cl::WaitForEvent(read->get());
    if (!st.ok())
      return st.Prepend("dump-inputs: input '" + desc.name + "'");
    nn::Tensor t;
    t.name = desc.name;
    t.dtype = ToDType(desc.type);
    t.shape = nn::Shape(desc.dims);
    t.data = std::make_shared<const nn::Bytes>(host_);
    const std::string path =
        (std::filesystem::path(dir_) / InputDumpFileName(desc.name, frame_)).string();
    st = nn::WriteNpy(path, t);
    if (!st.ok())
      return st.Prepend("dump-inputs");
  }
  ++frame_;
  return Status::Ok();
}

}  // namespace op::net
