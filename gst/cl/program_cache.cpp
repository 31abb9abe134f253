#include "program_cache.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <vector>

#include "device.h"

namespace op::cl {
namespace {

constexpr char kMagic[8] = {'O', 'P', 'C', 'L', 'B', 'I', 'N', '1'};

std::string Hex64(uint64_t v) {
  char buf[17];
  std::snprintf(buf, sizeof(buf), "%016llx", static_cast<unsigned long long>(v));
  return buf;
}

void MakeDirs(const std::string &path) {
  for (size_t pos = 1; pos <= path.size(); pos++) {
    if (pos == path.size() || path[pos] == '/')
      mkdir(path.substr(0, pos).c_str(), 0755);
  }
}

std::string BuildLog(cl_program program, cl_device_id device) {
  size_t n = 0;
  clGetProgramBuildInfo(program, device, CL_PROGRAM_BUILD_LOG, 0, nullptr, &n);
  std::string log(n, '\0');
  if (n)
    clGetProgramBuildInfo(program, device, CL_PROGRAM_BUILD_LOG, n, log.data(), nullptr);
  while (!log.empty() && (log.back() == '\0' || log.back() == '\n'))
    log.pop_back();
  if (log.size() > 4000)
    log = log.substr(0, 4000) + "\n[build log cut]";
  return log;
}

}  // namespace

uint64_t Fnv1a64(std::string_view data, uint64_t seed) {
  uint64_t h = seed;
  for (unsigned char c : data) {
    h ^= c;
    h *= 0x100000001b3ull;
  }
  return h;
}

std::string ProgramCache::DefaultDir() {
  const char *xdg = std::getenv("XDG_CACHE_HOME");
  if (xdg && *xdg)
    return std::string(xdg) + "/gst-op/programs";
  const char *home = std::getenv("HOME");
  if (home && *home)
    return std::string(home) + "/.cache/gst-op/programs";
  return {};
}

ProgramCache::ProgramCache(cl_context context, cl_device_id device, const Capabilities &caps,
                           std::string dir)
    : context_(context), device_(device) {
  device_key_ = caps.platform_name + "|" + caps.platform_version + "|" + caps.device_name + "|" +
                caps.driver_version + "|" + caps.device_version;
  if (dir == "none")
    dir_.clear();
  else
    dir_ = dir.empty() ? DefaultDir() : dir;
}

std::string ProgramCache::KeyOf(std::string_view source, std::string_view options) const {
  std::string all = device_key_;
  all += '\x1f';
  all += options;
  all += '\x1f';
  all += source;
  // Two independent 64-bit hashes: a 128-bit name makes an accidental collision implausible.
  return Hex64(Fnv1a64(all)) + Hex64(Fnv1a64(all, 0x84222325cbf29ce4ull));
}

StatusOr<ProgramHandle> ProgramCache::Build(std::string_view source, std::string_view options,
                                            std::string_view label) {
  std::string key = KeyOf(source, options);
  std::lock_guard<std::mutex> guard(lock_);
  auto it = programs_.find(key);
  if (it != programs_.end()) {
    stats_.memory_hits++;
    return it->second;
  }
  std::string path = dir_.empty() ? std::string() : dir_ + "/" + key + ".bin";
  if (!path.empty()) {
    ProgramHandle program = LoadBinary(path, key, options);
    if (program) {
      stats_.disk_hits++;
      programs_[key] = program;
      return program;
    }
  }
  OP_ASSIGN_OR_RETURN(ProgramHandle program, BuildFromSource(source, options, label));
  stats_.builds++;
  if (!path.empty())
    StoreBinary(program.get(), path, key);
  programs_[key] = program;
  return program;
}

StatusOr<ProgramHandle> ProgramCache::BuildFromSource(std::string_view source,
                                                      std::string_view options,
                                                      std::string_view label) {
  const char *text = source.data();
  size_t len = source.size();
  cl_int err = CL_SUCCESS;
  ProgramHandle program(clCreateProgramWithSource(context_, 1, &text, &len, &err));
  if (err != CL_SUCCESS)
    return ClError("clCreateProgramWithSource", err);
  std::string opts(options);
  err = clBuildProgram(program.get(), 1, &device_, opts.c_str(), nullptr, nullptr);
  if (err != CL_SUCCESS) {
    return DeviceError("building OpenCL program \"" + std::string(label) + "\" (options \"" + opts +
                       "\") failed: " + ErrorName(err) + "\n" + BuildLog(program.get(), device_));
  }
  return program;
}

ProgramHandle ProgramCache::LoadBinary(const std::string &path, const std::string &key,
                                       std::string_view options) {
  std::ifstream in(path, std::ios::binary);
  if (!in)
    return {};
  std::vector<char> data((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  // Layout: magic, 32-char key, binary. A file that does not match is ignored and rewritten.
  if (data.size() <= sizeof(kMagic) + key.size() ||
      std::memcmp(data.data(), kMagic, sizeof(kMagic)) != 0 ||
      std::memcmp(data.data() + sizeof(kMagic), key.data(), key.size()) != 0)
    return {};
  const unsigned char *bin =
      reinterpret_cast<const unsigned char *>(data.data() + sizeof(kMagic) + key.size());
  size_t bin_size = data.size() - sizeof(kMagic) - key.size();
  cl_int status = CL_SUCCESS, err = CL_SUCCESS;
  ProgramHandle program(
      clCreateProgramWithBinary(context_, 1, &device_, &bin_size, &bin, &status, &err));
  if (err != CL_SUCCESS || status != CL_SUCCESS)
    return {};
  std::string opts(options);
  if (clBuildProgram(program.get(), 1, &device_, opts.c_str(), nullptr, nullptr) != CL_SUCCESS)
    return {};
  return program;
}

void ProgramCache::StoreBinary(cl_program program, const std::string &path,
                               const std::string &key) {
  size_t size = 0;
  if (clGetProgramInfo(program, CL_PROGRAM_BINARY_SIZES, sizeof(size), &size, nullptr) !=
          CL_SUCCESS ||
      size == 0)
    return;
  std::vector<unsigned char> bin(size);
  unsigned char *ptr = bin.data();
  if (clGetProgramInfo(program, CL_PROGRAM_BINARIES, sizeof(ptr), &ptr, nullptr) != CL_SUCCESS)
    return;
  MakeDirs(dir_);
  // Write to a private name and rename, so a concurrent reader never sees half a file.
  std::string tmp = path + ".tmp" + std::to_string(getpid());
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out)
      return;
    out.write(kMagic, sizeof(kMagic));
    out.write(key.data(), static_cast<std::streamsize>(key.size()));
    out.write(reinterpret_cast<const char *>(bin.data()), static_cast<std::streamsize>(size));
    if (!out) {
      std::remove(tmp.c_str());
      return;
    }
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0)
    std::remove(tmp.c_str());
}

ProgramCache::Stats ProgramCache::stats() const {
  std::lock_guard<std::mutex> guard(lock_);
  return stats_;
}

StatusOr<KernelHandle> CreateKernel(cl_program program, const char *name) {
  cl_int err = CL_SUCCESS;
  KernelHandle k(clCreateKernel(program, name, &err));
  if (err != CL_SUCCESS)
    return ClError(("clCreateKernel(\"" + std::string(name) + "\")").c_str(), err);
  return k;
}

}  // namespace op::cl
