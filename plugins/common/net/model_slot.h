// What opvision and oppolicy share around their networks: the model slot (load on start, reload
// in the background while playing, swap at a frame boundary) and taking an input GstMemory as a
// cl_mem.
#pragma once

#include <functional>
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

  // The element that posts "op-compile-progress" messages while a model's programs build, and
  // the errors and warnings of Start() and AdoptPending().
  void SetOwner(GstElement *owner);

  // Any thread. While open, starts loading `path` in the background (after any load in flight).
  void SetPath(const std::string &path);
  std::string path() const;
  void SetPrecision(Precision p);
  Precision precision() const;

  // What an element makes of a network before running it (its plan of which input is which,
  // its temporal queues), kept by the callback until the element commits it: fails when the
  // network is not one the element runs, or does not fit the negotiated stream. The running
  // network and the element's state stay untouched until the callback succeeded.
  using Prepare = std::function<Status(const Network &)>;

  // start(): loads the current path synchronously (an ONNX model is compiled here, or found in
  // the cache) and prepares it. On failure posts an element error from the owner and closes the
  // slot: LIBRARY/INIT "Could not load the <role> model" (RESOURCE/NOT_FOUND for a missing
  // file), or CORE/NEGOTIATION "The model is not <kind>" when `prepare` rejects it.
  // A load that Preload() started for the same path, precision and device is taken instead
  // (waiting for it to finish), with the same errors.
  bool Start(std::shared_ptr<cl::Device> device, const char *role, const char *kind,
             const Prepare &prepare);
  // NULL→READY: starts loading the current path (if any) in the background for Start(). A
  // pipeline's elements change state one after another, so without it each network would load
  // only once the element after it had loaded its own; with it they load side by side.
  void Preload(std::shared_ptr<cl::Device> device);
  // stop(): waits for a background load, drops both networks.
  void Close();

  Network *current() const { return current_.get(); }
  // The file the running network came from (any thread).
  std::string current_path() const;

  enum class Swap {
    kNone,        // nothing adopted: no load finished, or the new network was rejected
    kSame,        // adopted; its outputs are the ones negotiated
    kNewOutputs,  // adopted; its outputs differ from `negotiated`: renegotiate
  };
  // Streaming thread, at a frame boundary: when a background load finished, prepares the new
  // network and makes it the current one. A network that failed to load or that `prepare`
  // rejects posts a warning from the owner ("the previous model keeps running") and is dropped.
  // The old network is dropped after the caller's in-flight work, which is ordered before any
  // later enqueue on the same queue.
  Swap AdoptPending(const Prepare &prepare, const GstOpTensorInfo &negotiated);

 private:
  struct Pending {
    bool present = false;  // a background load finished since the last call
    std::string path;
    Precision precision = Precision::kAuto;
    std::shared_ptr<cl::Device> device;
    Status status;                     // why it failed, when it did
    std::unique_ptr<Network> network;  // the new network when it loaded
  };
  Pending TakePending();
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
