// What opvision and oppolicy share around their networks: the model slot (load on start, reload
// in the background while playing, swap at a frame boundary), the frame timer (device time per
// frame measured without host waits), and taking an input GstMemory as a cl_mem.
#pragma once

#include <array>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "common/net/network.h"
#include "op/gstopcontext.h"
#include "op/gstopupload.h"

// The `precision` property's enum (op::net::Precision values).
#define GST_TYPE_OP_PRECISION (gst_op_precision_get_type())
GType gst_op_precision_get_type(void);

namespace op::net {

// The network an element runs and the one it may switch to. The streaming thread owns
// current(); set_property threads only set the path, and a load started while playing runs on
// a thread of its own so frames keep flowing until the new network is ready.
class ModelSlot {
 public:
  ModelSlot() = default;
  ModelSlot(const ModelSlot &) = delete;
  ModelSlot &operator=(const ModelSlot &) = delete;
  ~ModelSlot() { Close(); }

  // The element that posts "op-compile-progress" messages while a model's programs build.
  void SetOwner(GstElement *owner) { owner_ = owner; }

  // Any thread. While open, starts loading `path` in the background (after any load in flight).
  void SetPath(const std::string &path);
  std::string path() const;
  void SetPrecision(Precision p);
  Precision precision() const;

  // start(): loads the current path synchronously (an ONNX model is compiled here, or found in
  // the cache). Errors name the file.
  Status Open(std::shared_ptr<cl::Device> device);
  // stop(): waits for a background load, drops both networks.
  void Close();

  Network *current() const { return current_.get(); }
  // The file the running network came from (any thread).
  std::string current_path() const;

  struct Pending {
    bool present = false;  // a background load finished since the last call
    std::string path;
    Status status;                     // why it failed, when it did
    std::unique_ptr<Network> network;  // the new network when it loaded
  };
  // Streaming thread, at a frame boundary: the result of the last finished background load.
  Pending TakePending();
  // Makes `network` the current one (the caller checked it fits); the old one is dropped after
  // the caller's in-flight work, which is ordered before any later enqueue on the same queue.
  void Adopt(std::unique_ptr<Network> network, const std::string &path);

 private:
  void StartLoad(const std::string &path);
  StatusOr<std::unique_ptr<Network>> Load(std::shared_ptr<cl::Device> device,
                                          const std::string &path, Precision precision);

  GstElement *owner_ = nullptr;

  mutable std::mutex lock_;
  std::string path_;
  Precision precision_ = Precision::kAuto;
  std::shared_ptr<cl::Device> device_;
  bool open_ = false;
  std::thread loader_;
  Pending pending_;
  std::unique_ptr<Network> current_;
  std::string current_path_;  // guarded by lock_
};

// Two times per frame, both read in the completion callback of the frame's last event (the
// streaming thread never waits): from submission to completion, which includes waiting behind
// work queued earlier (what latency is made of), and the device time, from the start of the
// frame's first kernel to the end of its last (profiling events; what the stage costs).
class FrameTimer {
 public:
  struct Stats {
    uint64_t frames = 0;  // frames whose completion was seen
    uint64_t total_ns = 0;
    uint64_t max_ns = 0;
    uint64_t last_ns = 0;
    uint64_t device_frames = 0;  // frames with profiling information
    uint64_t device_total_ns = 0;
    uint64_t device_last_ns = 0;
    double mean_ns() const { return frames ? double(total_ns) / double(frames) : 0.0; }
    double device_mean_ns() const {
      return device_frames ? double(device_total_ns) / double(device_frames) : 0.0;
    }
    // The stage time for GstOpFrameMeta: device time where the queue profiles, else the
    // submission-to-completion time.
    uint64_t stage_ns() const { return device_frames ? device_last_ns : last_ns; }
  };

  ~FrameTimer() { Drain(); }
  // Starts timing a frame submitted at `start_ns` (Now()) that completes with `done`; its
  // device time runs from the start of `first` to the end of `last` (`done` when null). Frames
  // beyond kSlots in flight are not timed (never happens with bounded pools).
  void Track(cl_event done, int64_t start_ns, cl_event first = nullptr, cl_event last = nullptr);
  // Waits for every tracked completion callback (stop(), after the queue finished).
  void Drain();
  void Reset();
  Stats stats() const;
  // One line for the elements' log at stop: frames, mean device time, mean and longest time
  // from submission to completion.
  std::string Summary() const;
  static int64_t Now();

 private:
  static constexpr size_t kSlots = 64;
  struct Slot {
    FrameTimer *timer = nullptr;
    int64_t start_ns = 0;
    cl_event first = nullptr;  // retained while the slot is busy
    cl_event last = nullptr;
    bool busy = false;
  };
  static void CL_CALLBACK OnComplete(cl_event event, cl_int status, void *data);
  static void ReleaseEvents(Slot *slot);

  mutable std::mutex lock_;
  std::condition_variable idle_;
  std::array<Slot, kSlots> slots_{};
  size_t next_ = 0;
  int pending_ = 0;
  Stats stats_;
};

// The frame timer's read-only properties of opvision and oppolicy, at ids `first` (mean-time),
// first + 1 (max-time) and first + 2 (device-time), all in milliseconds.
void InstallFrameTimerProperties(GObjectClass *klass, guint first);
// For get_property: TRUE when `id` is one of them and `value` was set from `timer`.
bool GetFrameTimerProperty(const FrameTimer &timer, guint first, guint id, GValue *value);

// An input tensor as a cl_mem: a GstOpMemory on `ctx` is used in place; any other memory is
// uploaded by `uploader` into `staging` (created once by the caller for the negotiated size),
// which keeps the memory mapped and referenced until the write completes.
// `ready` is what a reader must wait for: the memory's last writer, or the upload.
struct DeviceTensor {
  cl_mem mem = nullptr;
  size_t offset = 0;  // bytes
  cl::EventHandle ready;
};
StatusOr<DeviceTensor> DeviceInput(GstOpContext *ctx, GstOpUploader *uploader, GstMemory *memory,
                                   size_t bytes, cl_mem staging);

}  // namespace op::net
