// Calibration data from the pipeline: the `dump-inputs` debug mode of opvision and oppolicy.
//
// When a folder is set, every run's model inputs (the warped images, the temporal queues:
// whatever the network takes) are read back to the host after their writers and written as
// `<input>-<frame>.npy` (frame: six digits, counted from 0 per element), exactly the bytes the
// network is given. `opc quantize --calibration DIR` reads such a folder.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "cl/queue.h"
#include "op/gstoptensor.h"

namespace op::net {

class InputDump {
 public:
  // Empty `dir` turns the dump off. The folder is created on the first frame.
  void set_dir(const std::string &dir) { dir_ = dir; }
  const std::string &dir() const { return dir_; }
  bool enabled() const { return !dir_.empty(); }
  uint64_t frames() const { return frame_; }

  // Writes tensor i of `info` from `inputs[i]` (byte 0) once `wait` has completed. Errors name
  // the input and the file.
  //
  // Debug mode only: this blocks the streaming thread on the device and writes files on the
  // frame path, which the elements otherwise never do. It exists so calibration sees exactly
  // what the device sees; nothing of it runs while the folder is unset.
  Status Write(cl::Queue &queue, const GstOpTensorInfo &info, const cl_mem *inputs,
               const cl::EventList &wait);

 private:
  std::string dir_;
  uint64_t frame_ = 0;
  std::vector<uint8_t> host_;
};

// The file name of input `name` at `frame` ("img-000012.npy"); characters other than letters,
// digits, '-' and '.' become '_'.
std::string InputDumpFileName(const std::string &name, uint64_t frame);

}  // namespace op::net
