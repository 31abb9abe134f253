#include "program_cache.h"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/file.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <optional>
#include <thread>
#include <vector>

#include "device.h"
#include "thread_pool.h"

extern char **environ;

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

// GST_OP_BUILD_LOG=1: a compile or link that succeeds with something in its build log (a
// driver's warnings, which some print only as a count on stderr) prints that log on stderr,
// named, so that what a device's compiler objects to in our kernels can be read.
void ReportBuildLog(cl_program program, cl_device_id device, std::string_view what) {
  static const bool wanted = [] {
    const char *env = std::getenv("GST_OP_BUILD_LOG");
    return env && std::string_view(env) == "1";
  }();
  if (!wanted)
    return;
  const std::string log = BuildLog(program, device);
  if (!log.empty())
    std::fprintf(stderr, "gst-op: build log of %.*s:\n%s\n", static_cast<int>(what.size()),
                 what.data(), log.c_str());
}

double NowMs() {
  return std::chrono::duration<double, std::milli>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// This process's CPU time (all its threads), in seconds.
double SelfCpuSeconds() {
  rusage u{};
  if (getrusage(RUSAGE_SELF, &u) != 0)
    return 0;
  return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
         static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec) * 1e-6;
}

// The cores other processes keep busy now: the CPU time not idle over a 100 ms sample of
// /proc/stat, less this process's own over the sample, in cores (a cold build takes seconds, so
// the sample costs little). Our own threads do not count: they are the ones that would wait for
// PoCL's one build at a time (two networks starting at once, each importing or generating code
// while the other builds, made opreplay's small models start without a helper: 9.0-9.4 s to the
// first message with empty caches against 5.8-6.0 s with one). Where /proc/stat cannot be read,
// the 1-minute load average; negative when neither is known.
double BusyCoresNow(int cores) {
  auto sample = [](double *idle, double *total) {
    std::ifstream in("/proc/stat");
    std::string cpu;
    double v[8] = {0};
    if (!(in >> cpu) || cpu != "cpu")
      return false;
    for (double &x : v)
      if (!(in >> x))
        return false;
    *idle = v[3] + v[4];  // idle, iowait
    *total = 0;
    for (double x : v)
      *total += x;
    return true;
  };
  double i0 = 0, t0 = 0, i1 = 0, t1 = 0;
  if (sample(&i0, &t0)) {
    const double self0 = SelfCpuSeconds(), w0 = NowMs();
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    const double self = (SelfCpuSeconds() - self0) / std::max((NowMs() - w0) * 1e-3, 1e-3);
    if (sample(&i1, &t1) && t1 > t0)
      return std::max(0.0, cores * (1.0 - (i1 - i0) / (t1 - t0)) - self);
  }
  double load = 0;
  return getloadavg(&load, 1) == 1 ? load : -1;
}

// The build helper's executable, when GST_OP_BUILD_HELPER asks for one: "1" the installed one,
// else the one of the build tree this library was built in; another value is its path; "0":
// none. Unset, empty or "auto": the installed or build-tree one when BuildHelperAutoWants says
// so for the cores busy now.
std::string HelperPath() {
  const char *env = std::getenv("GST_OP_BUILD_HELPER");
  const std::string v = env ? env : "";
  if (v == "0")
    return {};
  if (v.empty() || v == "auto") {
    const int cores = static_cast<int>(sysconf(_SC_NPROCESSORS_ONLN));
    const double busy = cores >= 2 ? BusyCoresNow(cores) : -1;
    if (busy < 0 || !BuildHelperAutoWants(busy, cores))
      return {};
  } else if (v != "1") {
    return access(v.c_str(), X_OK) == 0 ? v : std::string();
  }
  for (const char *candidate : {OP_BUILD_HELPER_INSTALLED, OP_BUILD_HELPER_BUILD_TREE})
    if (access(candidate, X_OK) == 0)
      return candidate;
  return {};
}

constexpr char kRequestsMagic[] = "OPBR2\n";

}  // namespace

bool BuildHelperAutoWants(double busy_cores, int cores) {
  return cores >= 2 && busy_cores <= cores - 1.0;
}

std::string SerializeProgramRequests(const std::vector<ProgramRequest> &requests,
                                     const std::string *link_options) {
  std::string out = kRequestsMagic;
  out += link_options ? "L " + std::to_string(link_options->size()) + "\n" + *link_options : "B\n";
  for (const ProgramRequest &r : requests) {
    out += std::to_string(r.source.size()) + " " + std::to_string(r.options.size()) + " " +
           std::to_string(r.label.size()) + "\n";
    out += r.source;
    out += r.options;
    out += r.label;
  }
  return out;
}

StatusOr<ProgramRequestFile> ParseProgramRequests(std::string_view bytes) {
  const std::string_view magic(kRequestsMagic);
  if (bytes.substr(0, magic.size()) != magic)
    return Corrupt("not a program request file");
  bytes.remove_prefix(magic.size());
  ProgramRequestFile out;
  if (bytes.substr(0, 2) == "L ") {
    const size_t eol = bytes.find('\n');
    unsigned long long n = 0;
    if (eol == std::string_view::npos || eol > 24 ||
        std::sscanf(std::string(bytes.substr(2, eol - 2)).c_str(), "%llu", &n) != 1 ||
        n > bytes.size() - eol - 1)
      return Corrupt("bad link options line");
    out.link = true;
    out.link_options = std::string(bytes.substr(eol + 1, n));
    bytes.remove_prefix(eol + 1 + n);
  } else if (bytes.substr(0, 2) == "B\n") {
    bytes.remove_prefix(2);
  } else {
    return Corrupt("no kind line");
  }
  std::vector<StoredProgramRequest> &reqs = out.requests;
  while (!bytes.empty()) {
    const size_t eol = bytes.find('\n');
    if (eol == std::string_view::npos || eol > 64)
      return Corrupt("request " + std::to_string(reqs.size()) + ": no size line");
    unsigned long long n[3] = {0, 0, 0};
    const std::string line(bytes.substr(0, eol));
    if (std::sscanf(line.c_str(), "%llu %llu %llu", &n[0], &n[1], &n[2]) != 3)
      return Corrupt("request " + std::to_string(reqs.size()) + ": bad size line");
    bytes.remove_prefix(eol + 1);
    if (n[0] > bytes.size() || n[1] > bytes.size() - n[0] || n[2] > bytes.size() - n[0] - n[1])
      return Corrupt("request " + std::to_string(reqs.size()) + ": truncated");
    StoredProgramRequest r;
    r.source = std::string(bytes.substr(0, n[0]));
    r.options = std::string(bytes.substr(n[0], n[1]));
    r.label = std::string(bytes.substr(n[0] + n[1], n[2]));
    bytes.remove_prefix(n[0] + n[1] + n[2]);
    reqs.push_back(std::move(r));
  }
  return out;
}

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
  pocl_ = caps.platform_name.find("Portable Computing Language") != std::string::npos;
  if (dir == "none")
    dir_.clear();
  else
    dir_ = dir.empty() ? DefaultDir() : dir;
}

std::string ProgramCache::KeyOf(std::string_view source, std::string_view options,
                                bool object) const {
  std::string all = device_key_;
  all += object ? "\x1f"
                  "object\x1f"
                : "\x1f";
  all += options;
  all += '\x1f';
  all += source;
  // Two independent 64-bit hashes: a 128-bit name makes an accidental collision implausible.
  return Hex64(Fnv1a64(all)) + Hex64(Fnv1a64(all, 0x84222325cbf29ce4ull));
}

StatusOr<ProgramHandle> ProgramCache::Build(std::string_view source, std::string_view options,
                                            std::string_view label) {
  return BuildKeyed(KeyOf(source, options), source, options, label);
}

namespace {

// One program's build, store and load, one process at a time (a lock on DIR/KEY.lock, released
// when the holder closes it or dies). PoCL keeps a program's machine code in a folder of its own
// cache named after the program, and two processes working on the same program at once race
// there: one crashed in readdir() while asking for the binary, as two conformance children
// built the same small model. Threads of one process exclude each other too (each opens its
// own file description). The holder builds; the others wait, then load what it stored.
class KeyLock {
 public:
  KeyLock(const std::string &dir, const std::string &key) {
    fd_ = open((dir + "/" + key + ".lock").c_str(), O_CREAT | O_RDWR | O_CLOEXEC, 0644);
    if (fd_ >= 0)
      while (flock(fd_, LOCK_EX) != 0 && errno == EINTR) {
      }
  }
  ~KeyLock() {
    if (fd_ >= 0)
      close(fd_);
  }
  KeyLock(const KeyLock &) = delete;
  KeyLock &operator=(const KeyLock &) = delete;

 private:
  int fd_ = -1;
};

// The lock of `key` in `dir`, made first; none without a folder (nothing shared on disk).
std::optional<KeyLock> LockKey(const std::string &dir, const std::string &key) {
  if (dir.empty())
    return std::nullopt;
  MakeDirs(dir);
  return std::optional<KeyLock>(std::in_place, dir, key);
}

}  // namespace

ProgramHandle ProgramCache::Find(const std::string &key, std::string_view options, bool object) {
  {
    std::lock_guard<std::mutex> guard(lock_);
    auto it = programs_.find(key);
    if (it != programs_.end()) {
      stats_.memory_hits++;
      return it->second;
    }
  }
  if (dir_.empty())
    return {};
  struct stat st {};
  if (stat((dir_ + "/" + key + ".bin").c_str(), &st) != 0)
    return {};
  KeyLock held(dir_, key);
  return LoadStored(key, options, object);
}

ProgramHandle ProgramCache::LoadStored(const std::string &key, std::string_view options,
                                       bool object) {
  const double t0 = NowMs();
  ProgramHandle p = LoadBinary(dir_ + "/" + key + ".bin", key, options, object);
  if (!p)
    return {};
  std::lock_guard<std::mutex> guard(lock_);
  stats_.disk_hits++;
  stats_.load_ms += NowMs() - t0;
  return programs_.emplace(key, p).first->second;
}

StatusOr<ProgramHandle> ProgramCache::BuildKeyed(const std::string &key, std::string_view source,
                                                 std::string_view options, std::string_view label,
                                                 bool object) {
  if (ProgramHandle found = Find(key, options, object))
    return found;
  // Compiled without the mutex, so that other threads build theirs meanwhile; a thread or
  // process building the same program holds its key's lock, and we load what it stored.
  const std::optional<KeyLock> held = LockKey(dir_, key);
  if (held)
    if (ProgramHandle found = LoadStored(key, options, object))
      return found;
  const double t0 = NowMs();
  OP_ASSIGN_OR_RETURN(ProgramHandle program, BuildFromSource(source, options, label, object));
  const double t1 = NowMs();
  if (!dir_.empty())
    StoreBinary(program.get(), dir_ + "/" + key + ".bin", key);
  const double t2 = NowMs();
  std::lock_guard<std::mutex> guard(lock_);
  stats_.builds++;
  stats_.build_ms += t1 - t0;
  stats_.store_ms += t2 - t1;
  auto [it, inserted] = programs_.emplace(key, program);
  return it->second;
}

void ProgramCache::Group(const std::vector<ProgramRequest> &requests, std::vector<size_t> *job_of,
                         std::vector<size_t> *first, std::vector<std::string> *keys) const {
  // Requests that share one source text and options (a model's kernels made from one template)
  // are matched first, without hashing: a key hashes the whole source, and a model has several
  // kernels per source.
  std::map<std::pair<const char *, std::string_view>, size_t> job_of_text;
  std::map<std::string, size_t> job_of_key;
  job_of->assign(requests.size(), 0);
  for (size_t i = 0; i < requests.size(); i++) {
    const ProgramRequest &r = requests[i];
    auto text = job_of_text.find({r.source.data(), r.options});
    // The same address and length: the same bytes.
    if (text != job_of_text.end() &&
        requests[(*first)[text->second]].source.size() == r.source.size()) {
      (*job_of)[i] = text->second;
      continue;
    }
    std::string key = KeyOf(r.source, r.options);
    auto [it, inserted] = job_of_key.emplace(key, first->size());
    if (inserted) {
      first->push_back(i);
      keys->push_back(std::move(key));
    }
    (*job_of)[i] = it->second;
    job_of_text.emplace(std::make_pair(r.source.data(), std::string_view(r.options)), it->second);
  }
}

void ProgramCache::StopHelper(int pid, const std::string &request_file,
                              const std::vector<std::string> &keys) {
  if (pid <= 0)
    return;
  int status = 0;
  if (waitpid(pid, &status, WNOHANG) == 0) {
    kill(pid, SIGKILL);
    waitpid(pid, &status, 0);
  }
  std::remove(request_file.c_str());
  for (const std::string &key : keys)  // a store it left half-written
    std::remove((dir_ + "/" + key + ".bin.tmp" + std::to_string(pid)).c_str());
}

StatusOr<std::vector<ProgramHandle>> ProgramCache::BuildAll(
    const std::vector<ProgramRequest> &requests, const BuildProgress &progress) {
  std::vector<size_t> job_of, first;
  std::vector<std::string> keys;
  Group(requests, &job_of, &first, &keys);
  const size_t jobs = first.size();
  std::vector<ProgramRequest> distinct;
  for (size_t j : first)
    distinct.push_back(requests[j]);
  std::string request_file;
  const int helper = StartHelper(distinct, keys, nullptr, &request_file);
  std::vector<StatusOr<ProgramHandle>> built(jobs, Status(StatusCode::kInternal, "not built"));
  std::mutex progress_lock;
  size_t done = 0;
  // The pool takes the jobs in order, from the first: the helper builds from the last.
  ThreadPool::Shared().ParallelFor(jobs, [&](size_t j) {
    const ProgramRequest &r = distinct[j];
    built[j] = BuildKeyed(keys[j], r.source, r.options, r.label);
    std::lock_guard<std::mutex> g(progress_lock);
    ++done;
    if (progress)
      progress(done, jobs);
  });
  // Every program is here: what the helper is still building, this process built already.
  StopHelper(helper, request_file, keys);
  std::vector<ProgramHandle> out(requests.size());
  for (size_t i = 0; i < requests.size(); i++) {
    if (!built[job_of[i]].ok())
      return built[job_of[i]].status();
    out[i] = *built[job_of[i]];
  }
  return out;
}

namespace {

bool IdentChar(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || c == '_';
}

// At a comment's start (`//` or `/*`), moves `*i` past it (a line comment to its newline, which
// the caller still sees; to the end of `source` when it runs there) and returns true.
bool SkipComment(std::string_view source, size_t *i) {
  if (source[*i] != '/' || *i + 1 >= source.size())
    return false;
  if (source[*i + 1] == '/') {
    *i = std::min(source.find('\n', *i), source.size());
    return true;
  }
  if (source[*i + 1] == '*') {
    const size_t end = source.find("*/", *i + 2);
    *i = end == std::string_view::npos ? source.size() : end + 2;
    return true;
  }
  return false;
}

// At an identifier's first character, returns the identifier and moves `*i` past it; else an
// empty view.
std::string_view ReadIdent(std::string_view source, size_t *i) {
  if (!IdentChar(source[*i]) || std::isdigit(static_cast<unsigned char>(source[*i])))
    return {};
  size_t j = *i;
  while (j < source.size() && IdentChar(source[j]))
    j++;
  const std::string_view id = source.substr(*i, j - *i);
  *i = j;
  return id;
}

void AddOnce(std::vector<std::string> &names, std::string_view id) {
  if (std::find(names.begin(), names.end(), id) == names.end())
    names.emplace_back(id);
}

// The names of the kernels `source` declares (`__kernel void <name>` or `kernel void <name>`,
// attributes between allowed), in order, once each; comments skipped.
std::vector<std::string> KernelNames(std::string_view source) {
  std::vector<std::string> names;
  int state = 0;  // 1: after `kernel`, 2: after `kernel ... void`
  size_t i = 0;
  while (i < source.size()) {
    const char c = source[i];
    if (SkipComment(source, &i))
      continue;
    if (const std::string_view id = ReadIdent(source, &i); !id.empty()) {
      if (state == 2) {
        AddOnce(names, id);
        state = 0;
      } else if (id == "__kernel" || id == "kernel") {
        state = 1;
      } else if (state == 1 && id == "void") {
        state = 2;
      }
      continue;
    }
    if (state == 2 && !std::isspace(static_cast<unsigned char>(c)))
      state = 0;  // `void` not followed by a name
    else if (state == 1 && (c == ';' || c == '{' || c == '}'))
      state = 0;
    i++;
  }
  return names;
}

// What a source declares at program scope that a second source compiled with it would clash
// with: the macros it defines (`#define NAME`) and its static functions and constants (the name
// before the first `(`, `[` or `=` after `static`, attributes skipped), each once; comments
// skipped. Statics written inside a macro's body (a function a macro defines) count too.
struct ScopeNames {
  std::vector<std::string> macros, statics;
};

ScopeNames ScopeNamesOf(std::string_view source) {
  ScopeNames out;
  bool line_start = true, after_hash = false, after_define = false, in_static = false;
  std::string_view last;
  size_t i = 0;
  while (i < source.size()) {
    const char c = source[i];
    if (SkipComment(source, &i))
      continue;
    if (c == '\n') {
      line_start = true;
      after_hash = after_define = false;
      i++;
      continue;
    }
    if (std::isspace(static_cast<unsigned char>(c)) || c == '\\') {
      i++;
      continue;
    }
    if (c == '#' && line_start) {
      after_hash = true;
      line_start = false;
      i++;
      continue;
    }
    line_start = false;
    if (const std::string_view id = ReadIdent(source, &i); !id.empty()) {
      if (after_hash) {
        after_define = id == "define";
        after_hash = false;
        continue;
      }
      if (after_define) {
        AddOnce(out.macros, id);
        after_define = false;
        continue;
      }
      if (id == "static") {
        in_static = true;
        last = {};
      } else if (in_static && id == "__attribute__") {
        // Skip its parenthesised arguments.
        size_t depth = 0, k = i;
        while (k < source.size()) {
          if (source[k] == '(')
            depth++;
          else if (source[k] == ')' && depth && --depth == 0) {
            k++;
            break;
          }
          k++;
        }
        i = k;
      } else if (in_static) {
        last = id;
      }
      continue;
    }
    if (in_static && (c == '(' || c == '[' || c == '=')) {
      if (!last.empty())
        AddOnce(out.statics, last);
      in_static = false;
    } else if (in_static && (c == ';' || c == '{' || c == '}')) {
      in_static = false;
    }
    after_hash = after_define = false;
    i++;
  }
  return out;
}

// One source compiling several: each part preceded by #defines renaming its kernels (`renamed`:
// name -> linked name) and its statics (suffixed with `tags[i]`), and followed by #undefs of
// those and of every macro it defines, so that each part compiles as it would alone, and its
// kernels come out with the names a compile of their own (-Dname=linked) gives them.
std::string BundleSource(const std::vector<std::string_view> &parts,
                         const std::vector<const std::map<std::string, std::string> *> &renamed,
                         const std::vector<std::string> &tags) {
  std::string out;
  for (size_t p = 0; p < parts.size(); p++) {
    const ScopeNames names = ScopeNamesOf(parts[p]);
    std::vector<std::string> undo;
    for (const auto &[from, to] : *renamed[p]) {
      out += "#define " + from + " " + to + "\n";
      undo.push_back(from);
    }
    for (const std::string &name : names.statics) {
      if (renamed[p]->count(name))
        continue;
      out += "#define " + name + " " + name + "__" + tags[p] + "\n";
      undo.push_back(name);
    }
    out += parts[p];
    out += "\n";
    for (const std::string &name : names.macros)
      undo.push_back(name);
    for (const std::string &name : undo)
      out += "#undef " + name + "\n";
  }
  return out;
}

}  // namespace

StatusOr<std::vector<KernelHandle>> ProgramCache::BuildKernelsUnlinked(
    const std::vector<KernelRequest> &requests, const std::vector<ProgramRequest> &programs,
    const BuildProgress &progress) {
  OP_ASSIGN_OR_RETURN(std::vector<ProgramHandle> built, BuildAll(programs, progress));
  std::vector<KernelHandle> out;
  for (size_t i = 0; i < requests.size(); i++) {
    OP_ASSIGN_OR_RETURN(KernelHandle k, CreateKernel(built[i].get(), requests[i].entry.c_str()));
    out.push_back(std::move(k));
  }
  return out;
}

// BuildKernels' plan: the distinct requests (jobs), their objects with renamed kernels, and the
// groups of jobs linked together.
struct ProgramCache::LinkPlan {
  std::vector<size_t> job_of;                               // per request
  std::vector<ProgramRequest> distinct;                     // per job, as asked
  std::vector<ProgramRequest> objects;                      // per job, kernels renamed
  std::vector<std::string> object_keys;                     // per job
  std::vector<std::map<std::string, std::string>> renamed;  // per job: kernel -> linked name
  std::vector<std::vector<size_t>> members;                 // per group: its jobs
  std::vector<std::string> keys;                            // per group
  std::string link_options;
  size_t groups() const { return keys.size(); }
  size_t group_of(size_t job) const { return job % keys.size(); }
};

size_t ProgramCache::LinkGroups(size_t distinct) {
  // At most eight, so that a warm start loads few programs, and more than two where there is
  // work enough, so that this process and the helper, each claiming groups from its end, share
  // it evenly (see BuildKernels): with four, the small vision model's last group was still
  // building in this process (after the policy's program) while the helper had finished its
  // two; eight of four to five sources each moved the first message of a cold start from
  // 5.7-5.9 s to 5.3-5.6 s (twelve: 6.0-6.1 s, more compiles and links). At least five
  // distinct requests per group: a link costs about what a compile does (PoCL links its builtin
  // library into every program), and a group's sources compile as one anyway, so a small
  // model (a conformance test's one or two kernels) links once.
  constexpr size_t kMaxGroups = 8, kMinPerGroup = 5;
  return std::max<size_t>(1, std::min(kMaxGroups, (distinct + kMinPerGroup - 1) / kMinPerGroup));
}

ProgramCache::LinkPlan ProgramCache::Plan(const std::vector<ProgramRequest> &requests,
                                          std::string_view link_options) const {
  LinkPlan plan;
  plan.link_options = std::string(link_options);
  std::vector<size_t> first;
  std::vector<std::string> keys;
  Group(requests, &plan.job_of, &first, &keys);
  const size_t jobs = first.size();
  plan.renamed.resize(jobs);
  for (size_t j = 0; j < jobs; j++) {
    const ProgramRequest &r = requests[first[j]];
    plan.distinct.push_back({r.source, r.options, r.label});
    std::string options = r.options;
    // Renamed after the source's key, not its place in this model: the same source and options
    // make the same object in every model, so models sharing kernels share objects.
    for (const std::string &name : KernelNames(r.source)) {
      const std::string to = name + "__op" + keys[j];
      options += " -D" + name + "=" + to;
      plan.renamed[j][name] = to;
    }
    plan.object_keys.push_back(KeyOf(keys[j], options, true));
    plan.objects.push_back({r.source, std::move(options), r.label});
  }
  const size_t groups = std::min(LinkGroups(jobs), jobs);
  // Jobs dealt out in turn: a network's layers come in runs of one kind (convolutions, then
  // matrix products) whose builds cost differently, and dealt out, each run spreads over every
  // group. (Halves did not divide the work: the full-size vision model's first half, its
  // convolutions, took 28 s to build against 11 s for the second.)
  plan.members.resize(groups);
  for (size_t j = 0; j < jobs; j++)
    plan.members[j % groups].push_back(j);
  for (size_t g = 0; g < groups; g++) {
    std::string all;
    for (size_t j : plan.members[g])
      all += plan.object_keys[j];
    plan.keys.push_back(KeyOf(all, "link " + plan.link_options));
  }
  return plan;
}

ProgramHandle ProgramCache::FindLinked(const LinkPlan &plan, size_t g) {
  return Find(plan.keys[g], plan.link_options, false);
}

ProgramHandle ProgramCache::FindObject(const LinkPlan &plan, size_t job) {
  return Find(plan.object_keys[job], plan.objects[job].options, true);
}

StatusOr<ProgramHandle> ProgramCache::BuildLinked(const LinkPlan &plan, size_t g,
                                                  const std::function<void(size_t)> &ready) {
  const std::vector<size_t> &jobs = plan.members[g];
  const size_t n = jobs.size();
  if (ProgramHandle p = FindLinked(plan, g)) {
    ready(n + 1);
    return p;
  }
  // The objects, then the link. Objects already in memory or on disk are loaded; the others are
  // compiled together as one source (BundleSource), where they are two or more with the same
  // options: each compile parses the driver's OpenCL C header again (PoCL: about 0.12 s, whatever
  // the kernel), which for a model's few dozen small sources was most of the compile time. A
  // bundle that fails to compile (two parts clashing in a way the renaming missed, or a part
  // that does not compile at all) leaves its parts to compile one by one, so that an error
  // names its own source.
  std::vector<StatusOr<ProgramHandle>> objects(n, Status(StatusCode::kInternal, "not built"));
  std::vector<size_t> missing;
  for (size_t i = 0; i < n; i++) {
    if (ProgramHandle o = FindObject(plan, jobs[i]))
      objects[i] = o;
    else
      missing.push_back(i);
  }
  ready(n - missing.size());
  ProgramHandle bundle;
  bool same_options = true;
  for (size_t i : missing)
    same_options =
        same_options && plan.distinct[jobs[i]].options == plan.distinct[jobs[missing[0]]].options;
  if (missing.size() >= 2 && same_options) {
    std::vector<std::string_view> parts;
    std::vector<const std::map<std::string, std::string> *> renamed;
    std::vector<std::string> tags;
    for (size_t i : missing) {
      parts.push_back(plan.distinct[jobs[i]].source);
      renamed.push_back(&plan.renamed[jobs[i]]);
      tags.push_back("b" + plan.object_keys[jobs[i]].substr(0, 16));
    }
    const std::string text = BundleSource(parts, renamed, tags);
    const double t0 = NowMs();
    StatusOr<ProgramHandle> b = BuildFromSource(
        text, plan.distinct[jobs[missing[0]]].options,
        "the " + std::to_string(missing.size()) + " sources of linked program " + plan.keys[g],
        true);
    const double t1 = NowMs();
    std::lock_guard<std::mutex> guard(lock_);
    stats_.build_ms += t1 - t0;
    if (b.ok()) {
      stats_.builds++;
      stats_.bundles++;
      bundle = *b;
    } else {
      stats_.bundle_fallbacks++;
    }
  }
  if (bundle) {
    ready(missing.size());
    missing.clear();
  }
  ThreadPool::Shared().ParallelFor(missing.size(), [&](size_t m) {
    const size_t i = missing[m];
    const ProgramRequest &r = plan.objects[jobs[i]];
    objects[i] = BuildKeyed(plan.object_keys[jobs[i]], r.source, r.options, r.label, true);
    ready(1);
  });
  std::vector<cl_program> inputs;
  if (bundle)
    inputs.push_back(bundle.get());
  for (const StatusOr<ProgramHandle> &o : objects) {
    if (!o.ok()) {
      if (bundle)
        continue;  // compiled in the bundle
      return o.status();
    }
    inputs.push_back(o->get());
  }
  const std::string &key = plan.keys[g];
  const std::optional<KeyLock> held = LockKey(dir_, key);  // as in BuildKeyed
  if (held) {
    if (ProgramHandle p = LoadStored(key, plan.link_options, false)) {
      ready(1);
      return p;
    }
  }
  const double t0 = NowMs();
  cl_int err = CL_SUCCESS;
  ProgramHandle linked(clLinkProgram(context_, 1, &device_, plan.link_options.c_str(),
                                     static_cast<cl_uint>(inputs.size()), inputs.data(), nullptr,
                                     nullptr, &err));
  const double t1 = NowMs();
  {
    std::lock_guard<std::mutex> guard(lock_);
    stats_.link_ms += t1 - t0;
  }
  if (err != CL_SUCCESS || !linked) {
    std::string log = linked ? BuildLog(linked.get(), device_) : std::string();
    return Status(StatusCode::kUnsupported, std::string("clLinkProgram: ") + ErrorName(err) +
                                                (log.empty() ? "" : "\n" + log));
  }
  ReportBuildLog(linked.get(), device_, "linking program " + key);
  if (!dir_.empty())
    StoreBinary(linked.get(), dir_ + "/" + key + ".bin", key);
  ready(1);
  std::lock_guard<std::mutex> guard(lock_);
  stats_.links++;
  stats_.store_ms += NowMs() - t1;
  return programs_.emplace(key, linked).first->second;
}

StatusOr<std::vector<KernelHandle>> ProgramCache::BuildKernels(
    const std::vector<KernelRequest> &requests, std::string_view link_options,
    const BuildProgress &progress) {
  std::vector<ProgramRequest> programs;
  for (const KernelRequest &r : requests)
    programs.push_back({r.source, r.options, r.label});
  const char *env = std::getenv("GST_OP_LINK");
  if (env && std::string(env) == "0")
    return BuildKernelsUnlinked(requests, programs, progress);
  const LinkPlan plan = Plan(programs, link_options);
  for (size_t i = 0; i < requests.size(); i++)
    if (!plan.renamed[plan.job_of[i]].count(requests[i].entry))
      return BuildKernelsUnlinked(requests, programs, progress);  // an entry the scan missed
  const size_t groups = plan.groups(), total = plan.objects.size() + groups;
  std::mutex progress_lock;
  size_t done = 0;
  // n more ready: counted one by one, as BuildProgress promises (1, 2, ... total).
  auto ready = [&](size_t n) {
    std::lock_guard<std::mutex> g(progress_lock);
    for (size_t k = 0; k < n; k++)
      if (progress)
        progress(++done, total);
  };

  std::vector<ProgramHandle> linked(groups);
  // One after the other: PoCL loads one at a time (side by side measured no faster).
  size_t missing = 0;
  for (size_t g = 0; g < groups; g++)
    missing += !(linked[g] = FindLinked(plan, g));
  if (missing) {
    // With a helper, each process claims a group before building it (a file made with O_EXCL):
    // this process from the first, the helper from the last (BuildLinkedFromEnd), so that they
    // meet wherever the work divides. A group the helper claimed, this process loads once the
    // helper has stored it (or builds it, should the helper be gone first).
    if (!dir_.empty())
      for (const std::string &key : plan.keys)  // left by a run that was stopped
        std::remove(ClaimPath(key).c_str());
    std::string request_file;
    int helper = StartHelper(plan.distinct, plan.keys, &plan.link_options, &request_file);
    const int helper_pid = helper;
    std::vector<size_t> theirs;
    Status failed = Status::Ok();
    auto build = [&](size_t g) {
      StatusOr<ProgramHandle> p = BuildLinked(plan, g, ready);
      if (p.ok())
        linked[g] = *p;
      else
        failed = p.status();
    };
    for (size_t g = 0; g < groups && failed.ok(); g++) {
      if (linked[g]) {
        ready(plan.members[g].size() + 1);
      } else if (helper > 0 && !Claim(plan.keys[g])) {
        theirs.push_back(g);
      } else {
        build(g);
      }
    }
    for (size_t g : theirs) {
      if (!failed.ok())
        break;
      struct stat st {};
      const std::string path = dir_ + "/" + plan.keys[g] + ".bin";
      int status = 0;
      while (helper > 0 && stat(path.c_str(), &st) != 0) {
        if (waitpid(helper, &status, WNOHANG) != 0)
          helper = 0;  // gone: what it did not store, this process builds
        else
          std::this_thread::sleep_for(std::chrono::milliseconds(10));
      }
      build(g);  // loads what the helper stored
    }
    // (One reaped above is not signalled.) What it may have left half-written: a linked
    // program's store or an object's.
    std::vector<std::string> stored = plan.keys;
    stored.insert(stored.end(), plan.object_keys.begin(), plan.object_keys.end());
    StopHelper(helper_pid, request_file, stored);
    if (!dir_.empty())
      for (const std::string &key : plan.keys)
        std::remove(ClaimPath(key).c_str());
    if (!failed.ok()) {
      if (failed.code() != StatusCode::kUnsupported)
        return failed;  // a source that does not compile: as it would unlinked
      {
        std::lock_guard<std::mutex> guard(lock_);
        stats_.link_fallbacks++;
      }
      return BuildKernelsUnlinked(requests, programs, progress);
    }
  } else {
    ready(total);
  }
  std::vector<KernelHandle> out;
  for (size_t i = 0; i < requests.size(); i++) {
    const size_t job = plan.job_of[i];
    const std::string &name = plan.renamed[job].at(requests[i].entry);
    OP_ASSIGN_OR_RETURN(KernelHandle k,
                        CreateKernel(linked[plan.group_of(job)].get(), name.c_str()));
    out.push_back(std::move(k));
  }
  return out;
}

Status ProgramCache::BuildLinkedFromEnd(const std::vector<ProgramRequest> &requests,
                                        std::string_view link_options) {
  if (dir_.empty())
    return Status::Ok();
  const LinkPlan plan = Plan(requests, link_options);
  for (size_t g = plan.groups(); g-- > 0;) {
    struct stat st {};
    if (stat((dir_ + "/" + plan.keys[g] + ".bin").c_str(), &st) == 0)
      continue;
    if (!Claim(plan.keys[g]))
      break;  // the parent's, and so are those before it
    Status built = BuildLinked(plan, g, [](size_t) {}).status();
    std::remove(ClaimPath(plan.keys[g]).c_str());
    OP_RETURN_IF_ERROR(built);
  }
  return Status::Ok();
}

std::string ProgramCache::ClaimPath(const std::string &key) const {
  return dir_ + "/" + key + ".claim";
}

bool ProgramCache::Claim(const std::string &key) {
  MakeDirs(dir_);
  const int fd = open(ClaimPath(key).c_str(), O_CREAT | O_EXCL | O_WRONLY, 0644);
  if (fd < 0)
    return false;
  close(fd);
  return true;
}

bool ProgramCache::HasBinary(std::string_view source, std::string_view options) const {
  if (dir_.empty())
    return false;
  struct stat st {};
  return stat((dir_ + "/" + KeyOf(source, options) + ".bin").c_str(), &st) == 0;
}

int ProgramCache::StartHelper(const std::vector<ProgramRequest> &requests,
                              const std::vector<std::string> &keys, const std::string *link_options,
                              std::string *request_file) {
  // Only PoCL (one compilation at a time per process), with binaries on disk for the two
  // processes to share, more than one hardware thread, and two or more programs to build.
  if (!pocl_ || dir_.empty() || helper_device_.empty() || ThreadPool::DefaultThreads() < 2)
    return 0;
  size_t missing = 0;
  {
    std::lock_guard<std::mutex> guard(lock_);
    for (const std::string &key : keys) {
      if (programs_.count(key))
        continue;
      struct stat st {};
      if (stat((dir_ + "/" + key + ".bin").c_str(), &st) != 0)
        missing++;
    }
  }
  if (missing < 2)
    return 0;
  const std::string exe = HelperPath();
  if (exe.empty())
    return 0;
  MakeDirs(dir_);
  *request_file = dir_ + "/requests-" + std::to_string(getpid()) + "-" +
                  Hex64(Fnv1a64(std::to_string(reinterpret_cast<uintptr_t>(this)) + "|" +
                                std::to_string(NowMs())));
  {
    const std::string bytes = SerializeProgramRequests(requests, link_options);
    std::ofstream out(*request_file, std::ios::binary | std::ios::trunc);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    if (!out) {
      out.close();
      std::remove(request_file->c_str());
      return 0;
    }
  }
  // Its output goes nowhere: what it fails to build, this process builds and reports.
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  for (int fd : {STDIN_FILENO, STDOUT_FILENO, STDERR_FILENO})
    posix_spawn_file_actions_addopen(&actions, fd, "/dev/null",
                                     fd == STDIN_FILENO ? O_RDONLY : O_WRONLY, 0);
  std::string a0 = exe, a1 = helper_device_, a2 = dir_, a3 = *request_file;
  char *argv[] = {a0.data(), a1.data(), a2.data(), a3.data(), nullptr};
  pid_t pid = 0;
  const int rc = posix_spawn(&pid, exe.c_str(), &actions, nullptr, argv, environ);
  posix_spawn_file_actions_destroy(&actions);
  if (rc != 0) {
    std::remove(request_file->c_str());
    return 0;
  }
  std::lock_guard<std::mutex> guard(lock_);
  stats_.helpers++;
  return pid;
}

StatusOr<ProgramHandle> ProgramCache::BuildFromSource(std::string_view source,
                                                      std::string_view options,
                                                      std::string_view label, bool object) {
  const char *text = source.data();
  size_t len = source.size();
  cl_int err = CL_SUCCESS;
  ProgramHandle program(clCreateProgramWithSource(context_, 1, &text, &len, &err));
  if (err != CL_SUCCESS)
    return ClError("clCreateProgramWithSource", err);
  std::string opts(options);
  err = object ? clCompileProgram(program.get(), 1, &device_, opts.c_str(), 0, nullptr, nullptr,
                                  nullptr, nullptr)
               : clBuildProgram(program.get(), 1, &device_, opts.c_str(), nullptr, nullptr);
  if (err != CL_SUCCESS) {
    return DeviceError(std::string(object ? "compiling" : "building") + " OpenCL program \"" +
                       std::string(label) + "\" (options \"" + opts +
                       "\") failed: " + ErrorName(err) + "\n" + BuildLog(program.get(), device_));
  }
  ReportBuildLog(program.get(), device_,
                 std::string(object ? "compiling \"" : "building \"") + std::string(label) + "\"");
  return program;
}

ProgramHandle ProgramCache::LoadBinary(const std::string &path, const std::string &key,
                                       std::string_view options, bool object) {
  // One read of the whole file (a stream iterator took a character at a time).
  std::vector<char> data;
  {
    std::ifstream in(path, std::ios::binary | std::ios::ate);
    if (!in)
      return {};
    const std::streamoff size = in.tellg();
    if (size <= 0)
      return {};
    data.resize(static_cast<size_t>(size));
    in.seekg(0);
    if (!in.read(data.data(), size))
      return {};
  }
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
  if (object)  // an object is linked as it is
    return program;
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

ProgressLine::ProgressLine(std::string prefix)
    : prefix_(std::move(prefix)), tty_(isatty(STDERR_FILENO)) {}

void ProgressLine::Update(const std::string &what, size_t done, size_t total) {
  if (!tty_)
    return;
  const double now = Now();
  std::lock_guard<std::mutex> g(lock_);
  if (start_ < 0 || what != what_) {  // a new build (For() sets both at its start)
    start_ = now;
    what_ = what;
    last_ = -1;
    shown_ = false;
  }
  const bool last = done == total;
  const double since = now - start_;
  if (!shown_ && since < 1.0)
    return;  // quick so far: say nothing
  if (!last && last_ >= 0 && now - last_ < 0.5)
    return;
  last_ = now;
  shown_ = !last;
  std::fprintf(stderr, "\r%s: %s: OpenCL programs %zu/%zu ready (%.1f s)%s", prefix_.c_str(),
               what.c_str(), done, total, since, last ? "\n" : "");
  std::fflush(stderr);
}

double ProgressLine::Now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

BuildProgress ProgressLine::For(const std::string &what) {
  {
    std::lock_guard<std::mutex> g(lock_);
    start_ = Now();  // the build starts now
    what_ = what;
    last_ = -1;
    shown_ = false;
  }
  return [this, what](size_t done, size_t total) { Update(what, done, total); };
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
