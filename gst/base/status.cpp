#include "base/status.h"

namespace op {

const char *StatusCodeName(StatusCode code) {
  switch (code) {
    case StatusCode::kOk:
      return "ok";
    case StatusCode::kInvalidArgument:
      return "invalid argument";
    case StatusCode::kNotFound:
      return "not found";
    case StatusCode::kUnsupported:
      return "unsupported";
    case StatusCode::kDeviceError:
      return "device error";
    case StatusCode::kIoError:
      return "I/O error";
    case StatusCode::kCorrupt:
      return "corrupt";
    case StatusCode::kInternal:
      return "internal error";
  }
  return "unknown";
}

std::string Status::ToString() const {
  if (ok())
    return "ok";
  return std::string(StatusCodeName(code_)) + ": " + message_;
}

Status InvalidArgument(std::string m) {
  return Status(StatusCode::kInvalidArgument, std::move(m));
}
Status NotFound(std::string m) {
  return Status(StatusCode::kNotFound, std::move(m));
}
Status Unsupported(std::string m) {
  return Status(StatusCode::kUnsupported, std::move(m));
}
Status DeviceError(std::string m) {
  return Status(StatusCode::kDeviceError, std::move(m));
}
Status IoError(std::string m) {
  return Status(StatusCode::kIoError, std::move(m));
}
Status Corrupt(std::string m) {
  return Status(StatusCode::kCorrupt, std::move(m));
}
Status Internal(std::string m) {
  return Status(StatusCode::kInternal, std::move(m));
}

}  // namespace op
