#include "drive/warp.h"

#include <string>

#include "drive_kernels.h"

namespace op::drive {

namespace {

constexpr const char *kProgram = "warp";

cl_device_fp_config SingleFpConfig(const cl::Device &device) {
  cl_device_fp_config config = 0;
  if (clGetDeviceInfo(device.id(), CL_DEVICE_SINGLE_FP_CONFIG, sizeof(config), &config, nullptr) !=
      CL_SUCCESS)
    return 0;
  return config;
}

}  // namespace

bool WarpIsBitExact(const cl::Device &device) {
  return (SingleFpConfig(device) & CL_FP_CORRECTLY_ROUNDED_DIVIDE_SQRT) != 0;
}

int WarpVectorWidth(const cl::Device &device) {
  return device.caps().is_cpu ? 16 : 4;
}

std::string WarpBuildOptions(const cl::Device &device, int vector_width) {
  if (vector_width == 0)
    vector_width = WarpVectorWidth(device);
  std::string options = "-cl-std=CL1.2 -DOP_WARP_VEC=" + std::to_string(vector_width);
  if (WarpIsBitExact(device))
    options += " -cl-fp32-correctly-rounded-divide-sqrt";
  return options;
}

namespace {

// The warp program for `device` at `vector_width`, from the device's program cache.
StatusOr<cl::ProgramHandle> WarpProgram(cl::Device &device, int vector_width) {
  std::string_view source = kernels::Find(kProgram);
  if (source.empty())
    return Internal("warp kernels are not embedded");
  return device.programs().Build(source, WarpBuildOptions(device, vector_width), kProgram);
}

}  // namespace

Status PrebuildWarpProgram(cl::Device &device) {
  return WarpProgram(device, WarpVectorWidth(device)).status();
}

StatusOr<std::unique_ptr<Warper>> Warper::Create(std::shared_ptr<cl::Device> device,
                                                 cl::Queue queue, const Nv12Layout &layout,
                                                 int vector_width) {
  if (!device || !queue)
    return InvalidArgument("warper needs an opened device and a queue");
  OP_RETURN_IF_ERROR(layout.Validate());
  if (vector_width == 0)
    vector_width = WarpVectorWidth(*device);
  if (vector_width != 1 && vector_width != 2 && vector_width != 4 && vector_width != 8 &&
      vector_width != 16)
    return InvalidArgument("warp vector width " + std::to_string(vector_width) +
                           " is not 1, 2, 4, 8 or 16");
  std::unique_ptr<Warper> w(new Warper());
  w->vector_width_ = vector_width;
  w->device_ = std::move(device);
  w->queue_ = std::move(queue);
  w->layout_ = layout;
  w->SetMatrix({{{1, 0, 0}, {0, 1, 0}, {0, 0, 1}}});

  OP_ASSIGN_OR_RETURN(w->program_, WarpProgram(*w->device_, vector_width));
  OP_ASSIGN_OR_RETURN(w->kernel_, cl::CreateKernel(w->program_.get(), "op_warp_nv12"));
  OP_ASSIGN_OR_RETURN(w->history_, w->device_->CreateBuffer(kHistoryFrames * kFrameTensorBytes));
  OP_RETURN_IF_ERROR(w->Reset());
  return w;
}

void Warper::SetMatrix(const Mat3 &m) {
  matrices_ = ToKernelMatrices(m);
}

Status Warper::SetLayout(const Nv12Layout &layout) {
  OP_RETURN_IF_ERROR(layout.Validate());
  if (layout.width != layout_.width || layout.height != layout_.height)
    return InvalidArgument("frame size changed from " + std::to_string(layout_.width) + "x" +
                           std::to_string(layout_.height) + " to " + std::to_string(layout.width) +
                           "x" + std::to_string(layout.height) + "; a new size needs a new warper");
  layout_ = layout;
  return Status::Ok();
}

Status Warper::Reset() {
  OP_ASSIGN_OR_RETURN(zeroed_,
                      queue_.Fill(history_.get(), 0, kHistoryFrames * kFrameTensorBytes, 0));
  frames_ = 0;
  return Status::Ok();
}

Status Warper::CheckSize(cl_mem mem, size_t needed, const char *what) const {
  if (!mem)
    return InvalidArgument(std::string("no ") + what + " buffer");
  size_t size = 0;
  OP_CL_CHECK(clGetMemObjectInfo(mem, CL_MEM_SIZE, sizeof(size), &size, nullptr));
  if (size < needed)
    return InvalidArgument(std::string(what) + " buffer holds " + std::to_string(size) +
                           " bytes, " + std::to_string(needed) + " needed");
  return Status::Ok();
}

StatusOr<cl::EventHandle> Warper::EnqueueWarp(cl_mem frame, cl_mem dst, size_t dst_offset,
                                              const cl::EventList &wait) {
  OP_RETURN_IF_ERROR(CheckSize(frame, layout_.MinBytes(), "frame"));
  cl_float16 m_y{}, m_uv{};
  for (int i = 0; i < 9; i++) {
    m_y.s[i] = matrices_.y[i];
    m_uv.s[i] = matrices_.uv[i];
  }
  const cl_uint offset = cl_uint(dst_offset);
  const cl_int width = layout_.width, height = layout_.height;
  // Validate() keeps every byte index below 2^32.
  const cl_uint y_offset = cl_uint(layout_.y_offset), y_stride = cl_uint(layout_.y_stride);
  const cl_uint uv_offset = cl_uint(layout_.uv_offset), uv_stride = cl_uint(layout_.uv_stride);
  OP_RETURN_IF_ERROR(cl::SetArgs(kernel_.get(), frame, dst, offset, width, height, y_offset,
                                 y_stride, uv_offset, uv_stride, m_y, m_uv));
  const size_t global[2] = {size_t(kPlaneCols / vector_width_), size_t(kPlaneRows)};
  return queue_.Launch(kernel_.get(), 2, global, nullptr, wait);
}

StatusOr<cl::EventHandle> Warper::WarpOnce(cl_mem frame, cl_mem dst, size_t dst_offset,
                                           const cl::EventList &wait) {
  if (dst_offset > 0xFFFFFFFFull - kFrameTensorBytes)
    return InvalidArgument("destination offset beyond 4 GiB");
  OP_RETURN_IF_ERROR(CheckSize(dst, dst_offset + kFrameTensorBytes, "destination"));
  return EnqueueWarp(frame, dst, dst_offset, wait);
}

StatusOr<cl::EventHandle> Warper::Process(cl_mem frame, cl_mem output, size_t output_offset,
                                          const cl::EventList &wait, cl::EventHandle *warp_event) {
  OP_RETURN_IF_ERROR(CheckSize(output, output_offset + kModelInputBytes, "output"));
  cl::EventList deps = wait;
  if (zeroed_ && !deps.Add(zeroed_.get()))
    return InvalidArgument("too many events to wait for");

  const size_t slot = size_t(frames_ % kHistoryFrames);
  const size_t oldest = size_t((frames_ + 1) % kHistoryFrames);  // frame t−4
  OP_ASSIGN_OR_RETURN(cl::EventHandle warped,
                      EnqueueWarp(frame, history_.get(), slot * kFrameTensorBytes, deps));
  zeroed_.reset();
  frames_++;

  OP_ASSIGN_OR_RETURN(cl::EventHandle first,
                      queue_.Copy(history_.get(), oldest * kFrameTensorBytes, output, output_offset,
                                  kFrameTensorBytes, {warped.get()}));
  // The second copy also waits for the first, so its event alone means "output complete" even
  // to a consumer on another queue.
  OP_ASSIGN_OR_RETURN(cl::EventHandle second,
                      queue_.Copy(history_.get(), slot * kFrameTensorBytes, output,
                                  output_offset + kFrameTensorBytes, kFrameTensorBytes,
                                  {warped.get(), first.get()}));
  if (warp_event)
    *warp_event = std::move(warped);
  return second;
}

}  // namespace op::drive
