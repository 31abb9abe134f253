// The policy network's temporal inputs, kept on the device (rules and their derivation:
// docs/contract.md, "Policy network and temporal inputs").
//
// The same state as openpilot's queues, as OpenCL buffers, so the hidden state goes from the
// vision output to the policy input without a host round trip:
//   features_buffer     (1, steps, width)         every `skip`-th of the last steps·skip hidden
//                                                 states, ending with the newest
//   desire_pulse        (1, steps, desire_width)  rising edges of the desire one-hot, max-pooled
//                                                 over groups of `skip` consecutive frames
//   traffic_convention  (1, 2)                    [1,0] right-hand traffic, [0,1] left-hand
// Queues start as zeros; a push comes before the read that includes it; only frames the networks
// run on push; a combined network reads with `lag = skip − 1`. Each queue is a ring indexed by
// the push count; one kernel per push writes the slot and gathers the input. Buffers and kernels
// are created once in Create(); a push only sets scalar arguments and enqueues.
//
// Not thread-safe: one streaming thread pushes; settings coming from other threads are the
// element's business.
#pragma once

#include <array>
#include <cstddef>
#include <memory>
#include <vector>

#include "cl/device.h"
#include "cl/queue.h"

namespace op::drive {

// The openpilot desire enum (log.capnp LateralPlan.Desire), in wire order.
enum class Desire : int {
  kNone = 0,
  kTurnLeft = 1,
  kTurnRight = 2,
  kLaneChangeLeft = 3,
  kLaneChangeRight = 4,
  kKeepLeft = 5,
  kKeepRight = 6,
};
constexpr int kDesireCount = 7;

// Which side of the road traffic keeps to. Right-hand traffic (left-hand-drive cars) is the
// default, like openpilot's `isRHD = false`.
enum class TrafficConvention : int { kRightHand = 0, kLeftHand = 1 };

struct TemporalShape {
  int steps = 25;        // entries of the network inputs (their dimension 1)
  int skip = 4;          // frames between two sampled hidden states; pulse group size
  int width = 512;       // floats per hidden state (features_buffer's last dimension)
  int desire_width = 8;  // desire one-hot width (desire_pulse's last dimension)
  // Age of the last sampled hidden state relative to the newest pushed one, in [0, skip):
  // 0 for a separate policy network (entries −97 … −1), skip − 1 for a combined network.
  int lag = 0;
  int history() const { return steps * skip; }  // frames kept in each queue
  size_t features_floats() const { return size_t(steps) * width; }
  size_t desire_floats() const { return size_t(steps) * desire_width; }
  // Checks the numbers are usable; the message names the bad one.
  Status Validate() const;
};

// Where a push writes one network input: a float32 buffer and the float offset in it.
struct TensorTarget {
  cl_mem mem = nullptr;
  size_t offset = 0;  // in floats
};

class TemporalQueues {
 public:
  // Builds the kernels (through the device's program cache), creates the rings and the three
  // input tensors, and enqueues their zeroing on `queue`; the returned object's ready_event()
  // completes when they are zero.
  static StatusOr<std::unique_ptr<TemporalQueues>> Create(std::shared_ptr<cl::Device> device,
                                                          cl::Queue &queue,
                                                          const TemporalShape &shape = {});

  const TemporalShape &shape() const { return shape_; }

  // The tensors the network reads, owned by this object (created once). A caller whose network
  // wants its inputs elsewhere (e.g. inside an arena) redirects them with SetTargets.
  cl_mem features() const { return features_.get(); }
  cl_mem desire_pulse() const { return desire_.get(); }
  cl_mem traffic_convention() const { return traffic_.get(); }
  // Redirects where the pushes write the three inputs; null members keep the owned buffers.
  // Checks each buffer is large enough for its tensor at its offset.
  Status SetTargets(const TensorTarget &features, const TensorTarget &desire_pulse,
                    const TensorTarget &traffic_convention);

  // Pushes one hidden state: floats [start, end) of `src` (e.g. the `hidden_state` slice of the
  // vision output) become the newest entry, and features_buffer is rewritten from the queue.
  // The command waits for `wait` (the producer of `src`, the last reader of the features) and
  // the returned event completes when features_buffer is ready.
  StatusOr<cl::EventHandle> PushFeatures(cl::Queue &queue, cl_mem src, size_t start, size_t end,
                                         const cl::EventList &wait = {});

  // Pushes this frame's desire (its rising-edge pulse becomes the newest entry) and writes
  // desire_pulse and traffic_convention.
  StatusOr<cl::EventHandle> PushDesire(cl::Queue &queue, Desire desire, TrafficConvention traffic,
                                       const cl::EventList &wait = {});

  // Back to the state after Create (zeros, no previous desire), e.g. after a flush or seek.
  StatusOr<cl::EventHandle> Reset(cl::Queue &queue, const cl::EventList &wait = {});

  // The event of the zeroing enqueued by Create; the first push should wait for it too (it is
  // on the same in-order queue in the usual case, so this matters only across queues).
  cl_event ready_event() const { return ready_.get(); }
  // Pushes since Create or Reset.
  long features_pushed() const { return features_pushed_; }
  long desires_pushed() const { return desires_pushed_; }

 private:
  TemporalQueues() = default;

  std::shared_ptr<cl::Device> device_;
  TemporalShape shape_;
  cl::ProgramHandle program_;
  cl::KernelHandle features_kernel_;
  cl::KernelHandle desire_kernel_;
  cl::MemHandle feature_ring_;  // history × width
  cl::MemHandle desire_ring_;   // history × desire_width
  cl::MemHandle features_, desire_, traffic_;
  TensorTarget features_target_, desire_target_, traffic_target_;
  cl::EventHandle ready_;
  long features_pushed_ = 0;
  long desires_pushed_ = 0;
  int previous_desire_ = 0;  // with index 0 zeroed: 0 means "no desire"
};

// A plain C++ model of the same queues, written the way openpilot's numpy code reads (shift the
// whole history, slice, reshape and max), independent of the ring arithmetic above: the tests'
// oracle and a CPU fallback.
class TemporalQueuesReference {
 public:
  explicit TemporalQueuesReference(const TemporalShape &shape = {});

  // `hidden` must hold shape.width floats.
  void PushFeatures(const float *hidden);
  // `desire` must be a valid enum value below desire_width.
  void PushDesire(Desire desire, TrafficConvention traffic);
  void Reset();

  // (steps, width), (steps, desire_width), (2).
  const std::vector<float> &features() const { return features_; }
  const std::vector<float> &desire_pulse() const { return desire_pulse_; }
  const std::array<float, 2> &traffic_convention() const { return traffic_; }

 private:
  TemporalShape shape_;
  std::vector<float> feature_history_;  // history × width, oldest first
  std::vector<float> desire_history_;   // history × desire_width, oldest first
  std::vector<float> previous_desire_;  // desire_width
  std::vector<float> features_, desire_pulse_;
  std::array<float, 2> traffic_{};  // zeros until the first desire push, like the device
};

// "none", "turn-left", …, "keep-right" (the element's property nicks).
const char *DesireName(Desire d);

}  // namespace op::drive
