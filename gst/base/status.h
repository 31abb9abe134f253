// Status: how every GStreamer-free layer reports failure (code + where + message).
//
// Runtime, driver, model and input errors are values, never asserts or exceptions: the elements
// turn a failed Status into a GStreamer error or warning that names the thing and the reason.
#pragma once

#include <optional>
#include <string>
#include <utility>

namespace op {

enum class StatusCode {
  kOk = 0,
  kInvalidArgument,  // a malformed string, option or input from the user
  kNotFound,         // a missing file, device, tensor or slice
  kUnsupported,      // an op, type or feature we do not implement (never reported as passed)
  kDeviceError,      // the OpenCL driver failed
  kIoError,          // reading or writing a file failed
  kCorrupt,          // a file is truncated, malformed or hostile
  kInternal,         // a bug of ours
};

const char *StatusCodeName(StatusCode code);

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(StatusCode code, std::string message) : code_(code), message_(std::move(message)) {}

  static Status Ok() { return Status(); }
  bool ok() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  const std::string &message() const { return message_; }

  // Prefixes the message with where it happened: "loading model.onnx: ...".
  Status &Prepend(const std::string &where) {
    if (!ok())
      message_ = where + ": " + message_;
    return *this;
  }
  std::string ToString() const;

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
};

// A value or the Status saying why there is none.
template <typename T>
class [[nodiscard]] StatusOr {
 public:
  StatusOr(T value) : value_(std::move(value)) {}  // NOLINT: implicit on purpose
  StatusOr(Status status) : status_(std::move(status)) {
    if (status_.ok())
      status_ = Status(StatusCode::kInternal, "StatusOr built from an ok Status");
  }

  bool ok() const { return status_.ok(); }
  const Status &status() const { return status_; }
  T &value() & { return *value_; }
  const T &value() const & { return *value_; }
  T &&value() && { return std::move(*value_); }
  T *operator->() { return &*value_; }
  const T *operator->() const { return &*value_; }
  T &operator*() & { return *value_; }
  const T &operator*() const & { return *value_; }

 private:
  Status status_;
  std::optional<T> value_;
};

Status InvalidArgument(std::string message);
Status NotFound(std::string message);
Status Unsupported(std::string message);
Status DeviceError(std::string message);
Status IoError(std::string message);
Status Corrupt(std::string message);
Status Internal(std::string message);

}  // namespace op

#define OP_CONCAT_INNER_(a, b) a##b
#define OP_CONCAT_(a, b) OP_CONCAT_INNER_(a, b)

#define OP_RETURN_IF_ERROR(expr)      \
  do {                                \
    ::op::Status op_status_ = (expr); \
    if (!op_status_.ok())             \
      return op_status_;              \
  } while (0)

// OP_ASSIGN_OR_RETURN(auto x, MakeX()); declares x from a StatusOr or returns its Status.
#define OP_ASSIGN_OR_RETURN(lhs, expr) OP_ASSIGN_OR_RETURN_(OP_CONCAT_(op_so_, __LINE__), lhs, expr)
#define OP_ASSIGN_OR_RETURN_(tmp, lhs, expr) \
  auto tmp = (expr);                         \
  if (!tmp.ok())                             \
    return tmp.status();                     \
  lhs = std::move(tmp).value()
