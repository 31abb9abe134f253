#include "queue.h"

#include "device.h"

namespace op::cl {

Status WaitForEvent(cl_event event) {
  if (!event)
    return Status::Ok();
  OP_CL_CHECK(clWaitForEvents(1, &event));
  cl_int exec = CL_COMPLETE;
  OP_CL_CHECK(
      clGetEventInfo(event, CL_EVENT_COMMAND_EXECUTION_STATUS, sizeof(exec), &exec, nullptr));
  if (exec < 0)
    return ClError("a command waited on", exec);
  return Status::Ok();
}

Status WaitForEvents(const EventList &events) {
  if (events.empty())
    return Status::Ok();
  OP_CL_CHECK(clWaitForEvents(events.size(), events.data()));
  return Status::Ok();
}

StatusOr<Queue> Queue::Create(const Device &device, bool profiling) {
  cl_queue_properties props[] = {
      CL_QUEUE_PROPERTIES,
      static_cast<cl_queue_properties>(profiling ? CL_QUEUE_PROFILING_ENABLE : 0), 0};
  cl_int err = CL_SUCCESS;
  Queue q;
  q.queue_ =
      QueueHandle(clCreateCommandQueueWithProperties(device.context(), device.id(), props, &err));
  if (err != CL_SUCCESS)
    return ClError("clCreateCommandQueueWithProperties", err);
  return q;
}

#define OP_ENQUEUE(call_name, ...)               \
  EventHandle ev;                                \
  cl_int err = call_name(__VA_ARGS__, ev.out()); \
  if (err != CL_SUCCESS)                         \
    return ClError(#call_name, err);             \
  return ev

StatusOr<EventHandle> Queue::Write(cl_mem dst, size_t offset, size_t bytes, const void *host,
                                   const EventList &wait) {
  OP_ENQUEUE(clEnqueueWriteBuffer, get(), dst, CL_FALSE, offset, bytes, host, wait.size(),
             wait.data());
}

StatusOr<EventHandle> Queue::Read(cl_mem src, size_t offset, size_t bytes, void *host,
                                  const EventList &wait) {
  OP_ENQUEUE(clEnqueueReadBuffer, get(), src, CL_FALSE, offset, bytes, host, wait.size(),
             wait.data());
}

StatusOr<EventHandle> Queue::Copy(cl_mem src, size_t src_offset, cl_mem dst, size_t dst_offset,
                                  size_t bytes, const EventList &wait) {
  OP_ENQUEUE(clEnqueueCopyBuffer, get(), src, dst, src_offset, dst_offset, bytes, wait.size(),
             wait.data());
}

StatusOr<EventHandle> Queue::WriteRect(cl_mem dst, size_t dst_offset, size_t dst_pitch,
                                       const void *host, size_t host_pitch, size_t row_bytes,
                                       size_t rows, const EventList &wait) {
  const size_t buf_origin[3] = {dst_offset % dst_pitch, dst_offset / dst_pitch, 0};
  const size_t host_origin[3] = {0, 0, 0};
  const size_t region[3] = {row_bytes, rows, 1};
  OP_ENQUEUE(clEnqueueWriteBufferRect, get(), dst, CL_FALSE, buf_origin, host_origin, region,
             dst_pitch, 0, host_pitch, 0, host, wait.size(), wait.data());
}

StatusOr<EventHandle> Queue::ReadRect(cl_mem src, size_t src_offset, size_t src_pitch, void *host,
                                      size_t host_pitch, size_t row_bytes, size_t rows,
                                      const EventList &wait) {
  const size_t buf_origin[3] = {src_offset % src_pitch, src_offset / src_pitch, 0};
  const size_t host_origin[3] = {0, 0, 0};
  const size_t region[3] = {row_bytes, rows, 1};
  OP_ENQUEUE(clEnqueueReadBufferRect, get(), src, CL_FALSE, buf_origin, host_origin, region,
             src_pitch, 0, host_pitch, 0, host, wait.size(), wait.data());
}

StatusOr<EventHandle> Queue::CopyRect(cl_mem src, size_t src_offset, size_t src_pitch, cl_mem dst,
                                      size_t dst_offset, size_t dst_pitch, size_t row_bytes,
                                      size_t rows, const EventList &wait) {
  const size_t src_origin[3] = {src_offset % src_pitch, src_offset / src_pitch, 0};
  const size_t dst_origin[3] = {dst_offset % dst_pitch, dst_offset / dst_pitch, 0};
  const size_t region[3] = {row_bytes, rows, 1};
  OP_ENQUEUE(clEnqueueCopyBufferRect, get(), src, dst, src_origin, dst_origin, region, src_pitch, 0,
             dst_pitch, 0, wait.size(), wait.data());
}

StatusOr<EventHandle> Queue::Fill(cl_mem dst, size_t offset, size_t bytes, uint8_t value,
                                  const EventList &wait) {
  OP_ENQUEUE(clEnqueueFillBuffer, get(), dst, &value, 1, offset, bytes, wait.size(), wait.data());
}

StatusOr<EventHandle> Queue::Launch(cl_kernel kernel, cl_uint dims, const size_t *global,
                                    const size_t *local, const EventList &wait) {
  OP_ENQUEUE(clEnqueueNDRangeKernel, get(), kernel, dims, nullptr, global, local, wait.size(),
             wait.data());
}

Status Queue::LaunchQuiet(cl_kernel kernel, cl_uint dims, const size_t *global, const size_t *local,
                          const EventList &wait) {
  OP_CL_CHECK(clEnqueueNDRangeKernel(get(), kernel, dims, nullptr, global, local, wait.size(),
                                     wait.data(), nullptr));
  return Status::Ok();
}

StatusOr<void *> Queue::Map(cl_mem mem, cl_map_flags flags, size_t offset, size_t bytes,
                            bool blocking, const EventList &wait, EventHandle *done) {
  cl_int err = CL_SUCCESS;
  EventHandle ev;
  void *ptr = clEnqueueMapBuffer(get(), mem, blocking ? CL_TRUE : CL_FALSE, flags, offset, bytes,
                                 wait.size(), wait.data(), ev.out(), &err);
  if (err != CL_SUCCESS)
    return ClError("clEnqueueMapBuffer", err);
  if (done)
    *done = std::move(ev);
  return ptr;
}

StatusOr<EventHandle> Queue::Unmap(cl_mem mem, void *ptr, const EventList &wait) {
  OP_ENQUEUE(clEnqueueUnmapMemObject, get(), mem, ptr, wait.size(), wait.data());
}

StatusOr<EventHandle> Queue::Marker(const EventList &wait) {
  OP_ENQUEUE(clEnqueueMarkerWithWaitList, get(), wait.size(), wait.data());
}

#undef OP_ENQUEUE

Status Queue::Flush() {
  OP_CL_CHECK(clFlush(get()));
  return Status::Ok();
}

Status Queue::Finish() {
  OP_CL_CHECK(clFinish(get()));
  return Status::Ok();
}

int64_t EventDurationNs(cl_event event) {
  cl_ulong start = 0, end = 0;
  if (clGetEventProfilingInfo(event, CL_PROFILING_COMMAND_START, sizeof(start), &start, nullptr) !=
          CL_SUCCESS ||
      clGetEventProfilingInfo(event, CL_PROFILING_COMMAND_END, sizeof(end), &end, nullptr) !=
          CL_SUCCESS)
    return -1;
  return static_cast<int64_t>(end - start);
}

}  // namespace op::cl
