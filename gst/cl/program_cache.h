// Builds OpenCL programs once per process and keeps their binaries on disk.
//
// Key: device name, driver and platform versions, source and build options. Binaries live in
// $XDG_CACHE_HOME/gst-op/programs (else ~/.cache/gst-op/programs); a binary that fails to load is
// rebuilt from source and replaced. Programs are built at start-up, never on the frame path.
// Build may be called from several threads at once (the cache's lock is not held while a program
// compiles); BuildAll builds a list of programs in parallel on the shared ThreadPool and reports
// progress as each finishes.
//
// PoCL compiles one program at a time per process, whatever the threads. So, when a helper is
// wanted, where the driver is PoCL, binaries go to disk and two or more programs are missing,
// BuildAll also starts a helper process (SetHelper) that builds the list from its end while this
// process builds it from its start, each storing what it builds; this process loads what the
// helper stored when it comes to it, and stops the helper when it has every program.
// GST_OP_BUILD_HELPER: 1 the installed or build-tree op-build-programs, a path that executable,
// 0 none; unset or "auto": the installed or build-tree one when a core is idle
// (BuildHelperAutoWants), since on a loaded machine it measured slower (docs/devices.md).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "handle.h"

namespace op::cl {

// The automatic choice of a build helper process: wanted when the machine has two or more
// cores and at least one of them is idle (the 1-minute load average at most cores - 1).
bool BuildHelperAutoWants(double load_average, int cores);

struct Capabilities;

struct ProgramRequest {
  std::string_view source;
  std::string options;
  std::string label;
};

// A request as the build helper reads it back (owning its text).
struct StoredProgramRequest {
  std::string source, options, label;
};
// The helper's request file: every request, in order.
std::string SerializeProgramRequests(const std::vector<ProgramRequest> &requests);
StatusOr<std::vector<StoredProgramRequest>> ParseProgramRequests(std::string_view bytes);

// Called after each distinct program of a BuildAll is ready (loaded or built): `done` of `total`,
// counting from 1, on whichever thread finished it, one call at a time and in increasing order.
using BuildProgress = std::function<void(size_t done, size_t total)>;

// A progress line on stderr for command-line tools, fed from BuildProgress callbacks (any thread).
// Only on a terminal (stderr redirected to a file or pipe: nothing, so logs and parsed output
// stay clean), and only while loading is slow: the first line comes once a second has passed,
// so a warm start prints nothing; then one line rewritten in place twice a second, and a last
// line when all is ready.
class ProgressLine {
 public:
  explicit ProgressLine(std::string prefix);
  // `what` names what is being built (a model), `done` of `total` ready; time counts from For,
  // else from the first Update naming `what`.
  void Update(const std::string &what, size_t done, size_t total);
  // A callback for one build of `what`, starting now.
  BuildProgress For(const std::string &what);

 private:
  static double Now();
  std::string prefix_, what_;
  std::mutex lock_;
  bool tty_ = false;
  double start_ = -1, last_ = -1;
  bool shown_ = false;
};

class ProgramCache {
 public:
  struct Stats {
    int memory_hits = 0;
    int disk_hits = 0;
    int builds = 0;
    int helpers = 0;  // helper processes started by BuildAll
    // Thread time summed over programs, in milliseconds (builds run in parallel, so the sums
    // exceed the wall time): compiling from source, storing binaries, loading binaries.
    double build_ms = 0, store_ms = 0, load_ms = 0;
  };

  // `dir` empty: the default folder; "none": memory only.
  ProgramCache(cl_context context, cl_device_id device, const Capabilities &caps,
               std::string dir = {});

  // The built program for `source` with `options`; `label` names it in build errors.
  StatusOr<ProgramHandle> Build(std::string_view source, std::string_view options,
                                std::string_view label);

  // The programs of `requests`, in order. Identical requests (same source and options) are built
  // once; the distinct ones in parallel. On failure, the error of the first failing request.
  StatusOr<std::vector<ProgramHandle>> BuildAll(const std::vector<ProgramRequest> &requests,
                                                const BuildProgress &progress = {});

  // True when the binary of `source` with `options` is on disk (not loaded).
  bool HasBinary(std::string_view source, std::string_view options) const;
  // The device as `Device::Open` takes it ("P:D"), for the helper process; empty: no helper.
  void SetHelper(std::string device_spec) { helper_device_ = std::move(device_spec); }

  Stats stats() const;
  const std::string &dir() const { return dir_; }
  static std::string DefaultDir();

 private:
  std::string KeyOf(std::string_view source, std::string_view options) const;
  // Build with the key already computed (KeyOf hashes the whole source).
  StatusOr<ProgramHandle> BuildKeyed(const std::string &key, std::string_view source,
                                     std::string_view options, std::string_view label);
  StatusOr<ProgramHandle> BuildFromSource(std::string_view source, std::string_view options,
                                          std::string_view label);
  ProgramHandle LoadBinary(const std::string &path, const std::string &key,
                           std::string_view options);
  void StoreBinary(cl_program program, const std::string &path, const std::string &key);
  // Starts the helper on `requests` (whose keys are `keys`) when it is worth it; its pid, or 0.
  int StartHelper(const std::vector<ProgramRequest> &requests, const std::vector<std::string> &keys,
                  std::string *request_file);

  cl_context context_;
  cl_device_id device_;
  std::string device_key_;
  std::string dir_;
  bool pocl_ = false;
  std::string helper_device_;
  mutable std::mutex lock_;
  std::map<std::string, ProgramHandle> programs_;
  Stats stats_;
};

// Creates a kernel, naming the program label and kernel in the error.
StatusOr<KernelHandle> CreateKernel(cl_program program, const char *name);

// 64-bit FNV-1a, for cache keys and file names (not for security).
uint64_t Fnv1a64(std::string_view data, uint64_t seed = 0xcbf29ce484222325ull);

// Sets kernel arguments in order: SetArgs(k, buffer, n, 1.0f).
namespace detail {
inline Status SetArgsFrom(cl_kernel, cl_uint) {
  return Status::Ok();
}
template <typename T, typename... Rest>
Status SetArgsFrom(cl_kernel k, cl_uint i, const T &v, const Rest &...rest) {
  cl_int err = clSetKernelArg(k, i, sizeof(T), &v);
  if (err != CL_SUCCESS)
    return ClError(("clSetKernelArg #" + std::to_string(i)).c_str(), err);
  return SetArgsFrom(k, i + 1, rest...);
}
}  // namespace detail

template <typename... Args>
Status SetArgs(cl_kernel k, const Args &...args) {
  return detail::SetArgsFrom(k, 0, args...);
}

}  // namespace op::cl
