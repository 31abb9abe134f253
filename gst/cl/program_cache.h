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
//
// BuildKernels goes further for a model's many kernels: it compiles each distinct request to an
// object and links the objects into up to eight programs (LinkGroups; the distinct requests
// dealt out in turn),
// whose binaries are cached whole, so that a warm start loads eight programs, not one per
// distinct request: PoCL links its builtin library's tables into every program and parses them
// again each time it loads one, which per program cost more than the kernel itself
// (docs/devices.md). Eight, not one, so that on PoCL the helper process builds some while this
// process builds the others, each claiming a program before building it: storing a program's
// binary is where PoCL compiles each of its kernels to machine code, most of a cold start. The
// objects of one linked program that are not cached are compiled together, as one source whose
// parts keep their own macros and statics (each compile parses the driver's OpenCL C header
// again: on PoCL 0.12 s, whatever the kernel); one that fails to compile so falls back to one
// compile per object.
// GST_OP_BUILD_HELPER: 1 the installed or build-tree op-build-programs, a path that executable,
// 0 none; unset or "auto": the installed or build-tree one when a core is idle now
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
// cores and at least one of them is idle (the cores busy, measured over 100 ms when a build
// starts, at most cores - 1).
bool BuildHelperAutoWants(double busy_cores, int cores);

struct Capabilities;

struct ProgramRequest {
  std::string_view source;
  std::string options;
  std::string label;
};

// One kernel for BuildKernels: the kernel `entry` of the program `source` built with `options`.
struct KernelRequest {
  std::string_view source;
  std::string options;
  std::string label;
  std::string entry;
};

// A request as the build helper reads it back (owning its text).
struct StoredProgramRequest {
  std::string source, options, label;
};
// The helper's request file: every request, in order, and whether they are BuildAll's programs
// or BuildKernels' (`link`, with its link options).
struct ProgramRequestFile {
  bool link = false;
  std::string link_options;
  std::vector<StoredProgramRequest> requests;
};
std::string SerializeProgramRequests(const std::vector<ProgramRequest> &requests,
                                     const std::string *link_options = nullptr);
StatusOr<ProgramRequestFile> ParseProgramRequests(std::string_view bytes);

// Called after each distinct program of a BuildAll is ready (loaded or built), or each object and
// link of a BuildKernels (a linked program loaded whole counts for its objects too): `done` of
// `total`, counting 1, 2, ..., on whichever thread finished it, one call at a time.
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
    int helpers = 0;  // helper processes started by BuildAll or BuildKernels
    // BuildKernels: programs linked from objects, and link failures that fell back to one
    // program per distinct request.
    int links = 0, link_fallbacks = 0;
    // BuildKernels: objects compiled together as one source, and such compiles that failed and
    // left their parts to compile one by one.
    int bundles = 0, bundle_fallbacks = 0;
    // Thread time summed over programs, in milliseconds (builds run in parallel, so the sums
    // exceed the wall time): compiling from source, storing binaries, loading binaries.
    // Linking, likewise.
    double build_ms = 0, store_ms = 0, load_ms = 0, link_ms = 0;
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

  // The kernels of `requests`, in order, each its own cl_kernel, from the programs linked with
  // `link_options` (with which a cached link is also loaded) out of the distinct requests'
  // objects (see the top). The kernels of each object are renamed after its source's key
  // (-D<name>=<name>__op<key>), so that one source compiled with different options links and
  // models sharing a kernel share its cached object; they are found in the source as
  // `__kernel void <name>` or `kernel void <name>`. Where a request's entry is not found so, a
  // link fails (a driver without a linker, sources sharing a global symbol) or GST_OP_LINK is 0,
  // the kernels come from one program per distinct request, as BuildAll builds them
  // (Stats::link_fallbacks counts the failed links). `progress` counts the objects and the
  // links. On failure, the first failing request's error.
  StatusOr<std::vector<KernelHandle>> BuildKernels(const std::vector<KernelRequest> &requests,
                                                   std::string_view link_options,
                                                   const BuildProgress &progress = {});
  // How many programs BuildKernels links `distinct` distinct requests into: one per six, at
  // least one and at most four.
  static size_t LinkGroups(size_t distinct);
  // For the helper process: builds and stores the programs BuildKernels links for `requests`,
  // from the last, skipping those on disk, until it meets one the parent claimed.
  Status BuildLinkedFromEnd(const std::vector<ProgramRequest> &requests,
                            std::string_view link_options);

  // True when the binary of `source` with `options` is on disk (not loaded).
  bool HasBinary(std::string_view source, std::string_view options) const;
  // The device as `Device::Open` takes it ("P:D"), for the helper process; empty: no helper.
  void SetHelper(std::string device_spec) { helper_device_ = std::move(device_spec); }

  Stats stats() const;
  const std::string &dir() const { return dir_; }
  static std::string DefaultDir();

 private:
  // An object's key differs from the executable's of the same source and options. (`source`
  // may be another key: an object's is derived from its source's, without hashing it again.)
  std::string KeyOf(std::string_view source, std::string_view options, bool object = false) const;
  // The program `key` from memory or from its binary on disk (kept in memory then), without
  // building it; null if neither has it.
  ProgramHandle Find(const std::string &key, std::string_view options, bool object);
  // Build (or compile, `object`) with the key already computed (KeyOf hashes the whole source).
  StatusOr<ProgramHandle> BuildKeyed(const std::string &key, std::string_view source,
                                     std::string_view options, std::string_view label,
                                     bool object = false);
  StatusOr<ProgramHandle> BuildFromSource(std::string_view source, std::string_view options,
                                          std::string_view label, bool object);
  // An executable is built from the binary with `options`; an object is only created.
  ProgramHandle LoadBinary(const std::string &path, const std::string &key,
                           std::string_view options, bool object);
  // Find's disk half, for a caller that holds the key's lock (KeyLock in the .cpp).
  ProgramHandle LoadStored(const std::string &key, std::string_view options, bool object);
  // Requests grouped into jobs, one per distinct source and options: job_of[i] is request i's,
  // first[j] job j's first request, keys[j] its key.
  void Group(const std::vector<ProgramRequest> &requests, std::vector<size_t> *job_of,
             std::vector<size_t> *first, std::vector<std::string> *keys) const;
  // BuildKernels' fallback: the kernels from BuildAll's programs (`programs`: the requests'
  // programs, in order).
  StatusOr<std::vector<KernelHandle>> BuildKernelsUnlinked(
      const std::vector<KernelRequest> &requests, const std::vector<ProgramRequest> &programs,
      const BuildProgress &progress);
  // BuildKernels' plan (program_cache.cpp) and its linked program `g`, loaded or built.
  struct LinkPlan;
  LinkPlan Plan(const std::vector<ProgramRequest> &requests, std::string_view link_options) const;
  StatusOr<ProgramHandle> BuildLinked(const LinkPlan &plan, size_t g,
                                      const std::function<void(size_t)> &ready);
  // Find() for linked program `g` and for job `job`'s object.
  ProgramHandle FindLinked(const LinkPlan &plan, size_t g);
  ProgramHandle FindObject(const LinkPlan &plan, size_t job);
  // A claim on building the program `key` (a file created exclusively); false: already claimed.
  bool Claim(const std::string &key);
  std::string ClaimPath(const std::string &key) const;
  void StoreBinary(cl_program program, const std::string &path, const std::string &key);
  // Starts the helper on `requests` (whose keys are `keys`; `link_options` for BuildKernels')
  // when two or more of those keys have no binary on disk; its pid, or 0.
  int StartHelper(const std::vector<ProgramRequest> &requests, const std::vector<std::string> &keys,
                  const std::string *link_options, std::string *request_file);
  void StopHelper(int pid, const std::string &request_file, const std::vector<std::string> &keys);

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
