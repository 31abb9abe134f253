#include "drive/temporal.h"

#include <algorithm>
#include <climits>
#include <string>

#include "drive_kernels.h"

namespace op::drive {
namespace {

StatusOr<size_t> BufferBytes(cl_mem mem) {
  size_t bytes = 0;
  OP_CL_CHECK(clGetMemObjectInfo(mem, CL_MEM_SIZE, sizeof(bytes), &bytes, nullptr));
  return bytes;
}

// A target fits when its floats [offset, offset + floats) lie inside the buffer and every index
// the kernel computes stays within int (the kernels index with int).
Status CheckTarget(const char *what, const TensorTarget &t, size_t floats) {
  OP_ASSIGN_OR_RETURN(size_t bytes, BufferBytes(t.mem));
  if (t.offset + floats > size_t(INT_MAX))
    return InvalidArgument(std::string(what) + ": float offset " + std::to_string(t.offset) +
                           " is beyond what the kernels index");
  if ((t.offset + floats) * sizeof(float) > bytes)
    return InvalidArgument(std::string(what) + ": a buffer of " + std::to_string(bytes) +
                           " bytes cannot hold " + std::to_string(floats) +
                           " floats at float offset " + std::to_string(t.offset));
  return Status::Ok();
}

}  // namespace

const char *DesireName(Desire d) {
  switch (d) {
    case Desire::kNone:
      return "none";
    case Desire::kTurnLeft:
      return "turn-left";
    case Desire::kTurnRight:
      return "turn-right";
    case Desire::kLaneChangeLeft:
      return "lane-change-left";
    case Desire::kLaneChangeRight:
      return "lane-change-right";
    case Desire::kKeepLeft:
      return "keep-left";
    case Desire::kKeepRight:
      return "keep-right";
  }
  return "unknown";
}

Status TemporalShape::Validate() const {
  if (steps < 1 || skip < 1 || width < 1 || desire_width < 1)
    return InvalidArgument("temporal queues: steps " + std::to_string(steps) + ", skip " +
                           std::to_string(skip) + ", width " + std::to_string(width) +
                           " and desire width " + std::to_string(desire_width) +
                           " must all be positive");
  if (lag < 0 || lag >= skip)
    return InvalidArgument("temporal queues: lag " + std::to_string(lag) +
                           " must lie in [0, skip) = [0, " + std::to_string(skip) + ")");
  if (long(steps) * skip > INT_MAX / std::max(width, desire_width))
    return InvalidArgument("temporal queues: a history of " + std::to_string(long(steps) * skip) +
                           " entries of " + std::to_string(std::max(width, desire_width)) +
                           " floats is too large");
  if (steps * desire_width < 2)
    return InvalidArgument("temporal queues: desire_pulse of " +
                           std::to_string(steps * desire_width) +
                           " float is too small to carry the traffic convention work-items");
  return Status::Ok();
}

StatusOr<std::unique_ptr<TemporalQueues>> TemporalQueues::Create(std::shared_ptr<cl::Device> device,
                                                                 cl::Queue &queue,
                                                                 const TemporalShape &shape) {
  OP_RETURN_IF_ERROR(shape.Validate());
  std::unique_ptr<TemporalQueues> q(new TemporalQueues());
  q->device_ = std::move(device);
  q->shape_ = shape;

  std::string_view src = kernels::Find("temporal");
  if (src.empty())
    return Internal("temporal queues: the kernel file temporal.cl is not embedded");
  OP_ASSIGN_OR_RETURN(q->program_, q->device_->programs().Build(src, "-cl-std=CL1.2", "temporal"));
  OP_ASSIGN_OR_RETURN(q->features_kernel_,
                      cl::CreateKernel(q->program_.get(), "op_temporal_features"));
  OP_ASSIGN_OR_RETURN(q->desire_kernel_, cl::CreateKernel(q->program_.get(), "op_temporal_desire"));

  const size_t history = size_t(shape.history());
  OP_ASSIGN_OR_RETURN(q->feature_ring_,
                      q->device_->CreateBuffer(history * shape.width * sizeof(float)));
  OP_ASSIGN_OR_RETURN(q->desire_ring_,
                      q->device_->CreateBuffer(history * shape.desire_width * sizeof(float)));
  OP_ASSIGN_OR_RETURN(q->features_,
                      q->device_->CreateBuffer(shape.features_floats() * sizeof(float)));
  OP_ASSIGN_OR_RETURN(q->desire_, q->device_->CreateBuffer(shape.desire_floats() * sizeof(float)));
  OP_ASSIGN_OR_RETURN(q->traffic_, q->device_->CreateBuffer(2 * sizeof(float)));
  q->features_target_ = {q->features_.get(), 0};
  q->desire_target_ = {q->desire_.get(), 0};
  q->traffic_target_ = {q->traffic_.get(), 0};

  OP_ASSIGN_OR_RETURN(q->ready_, q->Reset(queue));
  return q;
}

Status TemporalQueues::SetTargets(const TensorTarget &features, const TensorTarget &desire_pulse,
                                  const TensorTarget &traffic_convention) {
  TensorTarget f = features.mem ? features : TensorTarget{features_.get(), 0};
  TensorTarget d = desire_pulse.mem ? desire_pulse : TensorTarget{desire_.get(), 0};
  TensorTarget t = traffic_convention.mem ? traffic_convention : TensorTarget{traffic_.get(), 0};
  OP_RETURN_IF_ERROR(CheckTarget("features_buffer", f, shape_.features_floats()));
  OP_RETURN_IF_ERROR(CheckTarget("desire_pulse", d, shape_.desire_floats()));
  OP_RETURN_IF_ERROR(CheckTarget("traffic_convention", t, 2));
  features_target_ = f;
  desire_target_ = d;
  traffic_target_ = t;
  return Status::Ok();
}

StatusOr<cl::EventHandle> TemporalQueues::PushFeatures(cl::Queue &queue, cl_mem src, size_t start,
                                                       size_t end, const cl::EventList &wait) {
  if (!src)
    return InvalidArgument("hidden state: no source buffer");
  if (end < start || end - start != size_t(shape_.width))
    return InvalidArgument("hidden state: slice [" + std::to_string(start) + ", " +
                           std::to_string(end) + ") is " +
                           std::to_string(end < start ? 0 : end - start) +
                           " floats wide, features_buffer wants " + std::to_string(shape_.width));
  // A clGetMemObjectInfo is a host-side lookup (no device wait, no allocation): cheap enough per
  // frame, and it turns a bad slice into an error instead of an out-of-bounds device read.
  OP_RETURN_IF_ERROR(CheckTarget("hidden state source", {src, start}, size_t(shape_.width)));

  const int head = int(features_pushed_ % shape_.history());
  const cl_int src_offset = cl_int(start);
  const cl_int dst_offset = cl_int(features_target_.offset);
  cl_mem ring = feature_ring_.get();
  OP_RETURN_IF_ERROR(cl::SetArgs(features_kernel_.get(), src, ring, features_target_.mem,
                                 src_offset, dst_offset, cl_int(head), cl_int(shape_.steps),
                                 cl_int(shape_.skip), cl_int(shape_.lag), cl_int(shape_.width)));
  const size_t global = shape_.features_floats();
  OP_ASSIGN_OR_RETURN(cl::EventHandle done,
                      queue.Launch(features_kernel_.get(), 1, &global, nullptr, wait));
  features_pushed_++;
  return done;
}

StatusOr<cl::EventHandle> TemporalQueues::PushDesire(cl::Queue &queue, Desire desire,
                                                     TrafficConvention traffic,
                                                     const cl::EventList &wait) {
  const int d = static_cast<int>(desire);
  if (d < 0 || d >= kDesireCount || d >= shape_.desire_width)
    return InvalidArgument("desire " + std::to_string(d) + " is not a desire of a " +
                           std::to_string(shape_.desire_width) + "-wide desire_pulse");
  const int t = static_cast<int>(traffic);
  if (t != 0 && t != 1)
    return InvalidArgument("traffic convention " + std::to_string(t) + " is neither 0 nor 1");
  // One-hot with index 0 zeroed: "none" is the zero vector, so it is never an edge, and a desire
  // is an edge exactly when the previous one differs (see the header).
  const int pulse_index = (d != 0 && d != previous_desire_) ? d : -1;

  const int head = int(desires_pushed_ % shape_.history());
  cl_mem ring = desire_ring_.get();
  OP_RETURN_IF_ERROR(cl::SetArgs(desire_kernel_.get(), ring, desire_target_.mem,
                                 traffic_target_.mem, cl_int(desire_target_.offset),
                                 cl_int(traffic_target_.offset), cl_int(head), cl_int(pulse_index),
                                 cl_int(t), cl_int(shape_.steps), cl_int(shape_.skip),
                                 cl_int(shape_.desire_width)));
  const size_t global = shape_.desire_floats();
  OP_ASSIGN_OR_RETURN(cl::EventHandle done,
                      queue.Launch(desire_kernel_.get(), 1, &global, nullptr, wait));
  previous_desire_ = d;
  desires_pushed_++;
  return done;
}

StatusOr<cl::EventHandle> TemporalQueues::Reset(cl::Queue &queue, const cl::EventList &wait) {
  cl::EventHandle e[5];
  const size_t history = size_t(shape_.history());
  OP_ASSIGN_OR_RETURN(
      e[0], queue.Fill(feature_ring_.get(), 0, history * shape_.width * sizeof(float), 0, wait));
  OP_ASSIGN_OR_RETURN(e[1], queue.Fill(desire_ring_.get(), 0,
                                       history * shape_.desire_width * sizeof(float), 0, wait));
  OP_ASSIGN_OR_RETURN(e[2], queue.Fill(features_target_.mem, features_target_.offset * 4,
                                       shape_.features_floats() * sizeof(float), 0, wait));
  OP_ASSIGN_OR_RETURN(e[3], queue.Fill(desire_target_.mem, desire_target_.offset * 4,
                                       shape_.desire_floats() * sizeof(float), 0, wait));
  OP_ASSIGN_OR_RETURN(e[4], queue.Fill(traffic_target_.mem, traffic_target_.offset * 4,
                                       2 * sizeof(float), 0, wait));
  cl::EventList fills;
  for (auto &ev : e)
    fills.Add(ev.get());
  OP_ASSIGN_OR_RETURN(cl::EventHandle done, queue.Marker(fills));
  features_pushed_ = 0;
  desires_pushed_ = 0;
  previous_desire_ = 0;
  return done;
}

// ---------------------------------------------------------------------------------------------
// The host reference: literal shifts and slices, as openpilot's numpy code does them.

TemporalQueuesReference::TemporalQueuesReference(const TemporalShape &shape) : shape_(shape) {
  Reset();
}

void TemporalQueuesReference::Reset() {
  const size_t history = size_t(shape_.steps) * shape_.skip;
  feature_history_.assign(history * shape_.width, 0.0f);
  desire_history_.assign(history * shape_.desire_width, 0.0f);
  previous_desire_.assign(shape_.desire_width, 0.0f);
  features_.assign(shape_.features_floats(), 0.0f);
  desire_pulse_.assign(shape_.desire_floats(), 0.0f);
  traffic_ = {0.0f, 0.0f};
}

void TemporalQueuesReference::PushFeatures(const float *hidden) {
  const size_t w = shape_.width;
  const size_t history = size_t(shape_.steps) * shape_.skip;
  // full_features[:-1] = full_features[1:]; full_features[-1] = hidden
  std::copy(feature_history_.begin() + w, feature_history_.end(), feature_history_.begin());
  std::copy(hidden, hidden + w, feature_history_.end() - w);
  // features = full_features[-1 - lag - skip·(steps − 1) : len − lag : skip]
  const long first = long(history) - 1 - shape_.lag - long(shape_.skip) * (shape_.steps - 1);
  for (int s = 0; s < shape_.steps; s++) {
    const size_t row = size_t(first + long(s) * shape_.skip);
    std::copy_n(feature_history_.begin() + row * w, w, features_.begin() + s * w);
  }
}

void TemporalQueuesReference::PushDesire(Desire desire, TrafficConvention traffic) {
  const size_t dw = shape_.desire_width;
  std::vector<float> d(dw, 0.0f);
  d[size_t(desire)] = 1.0f;
  d[0] = 0.0f;
  std::vector<float> pulse(dw, 0.0f);
  for (size_t j = 0; j < dw; j++)
    pulse[j] = d[j] - previous_desire_[j] > 0.99f ? d[j] : 0.0f;
  previous_desire_ = d;
  std::copy(desire_history_.begin() + dw, desire_history_.end(), desire_history_.begin());
  std::copy(pulse.begin(), pulse.end(), desire_history_.end() - dw);
  // reshape (steps, skip, dw).max(axis=1)
  for (int s = 0; s < shape_.steps; s++)
    for (size_t j = 0; j < dw; j++) {
      float m = desire_history_[(size_t(s) * shape_.skip) * dw + j];
      for (int k = 1; k < shape_.skip; k++)
        m = std::max(m, desire_history_[(size_t(s) * shape_.skip + k) * dw + j]);
      desire_pulse_[s * dw + j] = m;
    }
  traffic_ = {0.0f, 0.0f};
  traffic_[traffic == TrafficConvention::kLeftHand ? 1 : 0] = 1.0f;
}

}  // namespace op::drive
