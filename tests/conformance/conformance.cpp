// Runs ONNX's own backend tests (Debian's libonnx-testdata) on a backend and compares with
// ONNX's tolerances (rtol 1e-3, atol 1e-7, as onnx/backend/test/runner does).
//
//   conformance [--data DIR] [--backend reference] [--folders node,simple,...] [--filter STR]
//               [--expect LIST]... [--write-passing DIR] [--timeout SECONDS] [--jobs N]
//               [--verbose]
//
// Each test runs in a child process (fork), so a crash or a hang (--timeout, 60 s) is counted,
// never fatal; --jobs children at once (default: one per core). Results print in test order.
// --write-passing writes passing-FOLDER.txt for the reference backend and
// passing-BACKEND-FOLDER.txt for others.
// Prints passed / failed / unsupported / crashed per folder. With --expect, exits 1 if any test
// named in the list (one name per line, '#' comments) does not pass; 77 if the data is missing.
#include <execinfo.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "backend.h"
#include "nn/onnx_import.h"
#include "nn/passes.h"
#include "nn/reference.h"
#include "nn/shape_inference.h"
#include "nn/reference_ops.h"

namespace fs = std::filesystem;
using namespace op;
using namespace op::nn;

namespace op::nn::conformance {
namespace {

class ReferenceBackend : public Backend {
 public:
  explicit ReferenceBackend(bool optimize) : optimize_(optimize) {}
  std::string name() const override { return optimize_ ? "reference-optimized" : "reference"; }
  StatusOr<std::vector<Tensor>> Run(const Graph &graph,
                                    const std::vector<Tensor> &inputs) override {
    if (!optimize_)
      return RunReference(graph, inputs);
    Graph g = graph;
    OP_RETURN_IF_ERROR(OptimizeGraph(g));
    OP_RETURN_IF_ERROR(g.Validate());
    return RunReference(g, inputs);
  }

 private:
  bool optimize_;
};

}  // namespace

StatusOr<std::unique_ptr<Backend>> MakeBackend(const std::string &name) {
  if (name == "reference")
    return std::unique_ptr<Backend>(new ReferenceBackend(false));
  if (name == "reference-optimized")
    return std::unique_ptr<Backend>(new ReferenceBackend(true));
  return MakeDeviceBackend(name);
}

}  // namespace op::nn::conformance

namespace {

enum class Outcome { kPassed = 0, kFailed = 1, kUnsupported = 2, kCrashed = 3 };
const char *OutcomeName(Outcome o) {
  switch (o) {
    case Outcome::kPassed:
      return "passed";
    case Outcome::kFailed:
      return "failed";
    case Outcome::kUnsupported:
      return "unsupported";
    case Outcome::kCrashed:
      return "crashed";
  }
  return "?";
}

// np.testing.assert_allclose(actual, expected, rtol, atol) with NaN == NaN, exact for integers.
std::string Compare(const Tensor &got, const Tensor &want) {
  if (got.dtype != want.dtype)
    return std::string("dtype ") + DTypeName(got.dtype) + ", expected " + DTypeName(want.dtype);
  if (got.shape != want.shape)
    return "shape " + got.shape.ToString() + ", expected " + want.shape.ToString();
  const double rtol = 1e-3, atol = 1e-7;
  const size_t n = static_cast<size_t>(want.shape.NumElements());
  size_t bad = 0, first = 0;
  for (size_t i = 0; i < n; ++i) {
    const double a = static_cast<double>(ref::GetReal(got, i));
    const double b = static_cast<double>(ref::GetReal(want, i));
    bool ok;
    if (std::isnan(a) || std::isnan(b))
      ok = std::isnan(a) && std::isnan(b);
    else if (std::isinf(a) || std::isinf(b))
      ok = a == b;
    else if (!IsFloat(want.dtype))
      ok = ref::GetReal(got, i) == ref::GetReal(want, i);
    else
      ok = std::fabs(a - b) <= atol + rtol * std::fabs(b);
    if (!ok && bad++ == 0)
      first = i;
  }
  if (!bad)
    return "";
  std::ostringstream ss;
  ss << bad << " of " << n << " values differ; first at " << first << ": "
     << static_cast<double>(ref::GetReal(got, first)) << " vs "
     << static_cast<double>(ref::GetReal(want, first));
  return ss.str();
}

// The runtime compiles static shapes, so inputs that ops read as parameters (Reshape's shape,
// Resize's scales, Slice's starts, reduction axes, ...) must be constants. ONNX's tests often
// feed them as graph inputs; those inputs (and only those: an input that is also read as data
// stays an input, so the backend still computes every data path) become constants holding the
// test's values.
bool IsParameterInput(OpKind op, size_t index) {
  switch (op) {
    case OpKind::kReshape:
    case OpKind::kExpand:
    case OpKind::kTile:
    case OpKind::kSqueeze:
    case OpKind::kUnsqueeze:
    case OpKind::kSplit:
    case OpKind::kCumSum:
    case OpKind::kTrilu:
    case OpKind::kReduceMean:
    case OpKind::kReduceSum:
    case OpKind::kReduceMax:
    case OpKind::kReduceMin:
    case OpKind::kReduceProd:
    case OpKind::kReduceL1:
    case OpKind::kReduceL2:
    case OpKind::kReduceSumSquare:
    case OpKind::kReduceLogSum:
    case OpKind::kReduceLogSumExp:
      return index == 1;
    case OpKind::kSlice:
    case OpKind::kPad:
    case OpKind::kResize:
    case OpKind::kClip:
    case OpKind::kDropout:
      return index >= 1;
    case OpKind::kRange:
    case OpKind::kConstantOfShape:
      return true;
    default:
      return false;
  }
}

void FreezeParameterInputs(Graph &g, std::vector<Tensor> &inputs) {
  std::vector<TensorId> keep_ids;
  std::vector<Tensor> keep_values;
  for (size_t i = 0; i < g.inputs.size(); ++i) {
    const TensorId id = g.inputs[i];
    bool param = false, data = false;
    for (const Node &n : g.nodes)
      for (size_t k = 0; k < n.inputs.size(); ++k)
        if (n.inputs[k] == id)
          (IsParameterInput(n.op, k) ? param : data) = true;
    if (param && !data && !g.tensor(id).is_output) {
      Tensor &t = g.tensor(id);
      t.data = inputs[i].data;
      t.shape = inputs[i].shape;
      t.is_input = false;
    } else {
      keep_ids.push_back(id);
      keep_values.push_back(std::move(inputs[i]));
    }
  }
  g.inputs = std::move(keep_ids);
  inputs = std::move(keep_values);
}

struct Result {
  Outcome outcome;
  std::string detail;
};

// One test folder (model.onnx + test_data_set_*): runs in the child process.
Result RunTest(const fs::path &dir, conformance::Backend &backend) {
  auto graph = ImportOnnxFile((dir / "model.onnx").string());
  if (!graph.ok())
    return {graph.status().code() == StatusCode::kUnsupported ? Outcome::kUnsupported
                                                              : Outcome::kFailed,
            graph.status().message()};
  std::vector<fs::path> sets;
  for (const auto &e : fs::directory_iterator(dir))
    if (e.is_directory() && e.path().filename().string().rfind("test_data_set_", 0) == 0)
      sets.push_back(e.path());
  std::sort(sets.begin(), sets.end());
  if (sets.empty())
    return {Outcome::kFailed, "no test_data_set_* folders"};
  for (const fs::path &set : sets) {
    std::vector<Tensor> inputs, expected;
    for (size_t i = 0;; ++i) {
      fs::path p = set / ("input_" + std::to_string(i) + ".pb");
      if (!fs::exists(p))
        break;
      auto t = ReadTensorProtoFile(p.string());
      if (!t.ok())
        return {t.status().code() == StatusCode::kUnsupported ? Outcome::kUnsupported
                                                              : Outcome::kFailed,
                t.status().message()};
      inputs.push_back(std::move(*t));
    }
    for (size_t i = 0;; ++i) {
      fs::path p = set / ("output_" + std::to_string(i) + ".pb");
      if (!fs::exists(p))
        break;
      auto t = ReadTensorProtoFile(p.string());
      if (!t.ok())
        return {t.status().code() == StatusCode::kUnsupported ? Outcome::kUnsupported
                                                              : Outcome::kFailed,
                t.status().message()};
      expected.push_back(std::move(*t));
    }
    Graph g = *graph;
    if (inputs.size() != g.inputs.size())
      return {Outcome::kFailed, "test gives " + std::to_string(inputs.size()) +
                                    " inputs, model has " + std::to_string(g.inputs.size())};
    // Inputs are matched by position, as ONNX's runner does; names follow the model.
    ShapeBindings bind;
    for (size_t i = 0; i < inputs.size(); ++i) {
      inputs[i].name = g.tensor(g.inputs[i]).name;
      bind[inputs[i].name] = inputs[i].shape;
    }
    FreezeParameterInputs(g, inputs);
    for (auto it = bind.begin(); it != bind.end();)
      it = g.tensor(g.FindTensor(it->first)).is_input ? std::next(it) : bind.erase(it);
    Status st = InferShapes(g, bind);
    if (!st.ok())
      return {st.code() == StatusCode::kUnsupported ? Outcome::kUnsupported : Outcome::kFailed,
              st.message()};
    auto outs = backend.Run(g, inputs);
    if (!outs.ok())
      return {outs.status().code() == StatusCode::kUnsupported ? Outcome::kUnsupported
                                                               : Outcome::kFailed,
              outs.status().message()};
    if (outs->size() != expected.size())
      return {Outcome::kFailed, "got " + std::to_string(outs->size()) + " outputs, expected " +
                                    std::to_string(expected.size())};
    for (size_t i = 0; i < expected.size(); ++i) {
      std::string diff = Compare((*outs)[i], expected[i]);
      if (!diff.empty())
        return {Outcome::kFailed,
                set.filename().string() + " output " + std::to_string(i) + ": " + diff};
    }
  }
  return {Outcome::kPassed, ""};
}

// A crashing child prints its stack to stderr before it dies, so a crash names its place.
// (backtrace() is called once beforehand: its first call may allocate.)
extern "C" void PrintStackAndDie(int sig) {
  void *frames[64];
  const int n = backtrace(frames, 64);
  const char head[] = "conformance: child crashed, stack:\n";
  ssize_t w = write(2, head, sizeof(head) - 1);
  (void)w;
  backtrace_symbols_fd(frames, n, 2);
  signal(sig, SIG_DFL);
  raise(sig);
}

void PrintStackOnCrash() {
  void *warm[1];
  backtrace(warm, 1);
  for (int sig : {SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT})
    signal(sig, PrintStackAndDie);
}

// A test running in a child process (fork): its outcome and message come back through a pipe.
struct Child {
  pid_t pid = -1;
  int fd = -1;
};

// Forks a child that runs the test and writes its outcome (and at most 4,000 characters of
// message, which a pipe holds without the child waiting on a reader).
Child StartIsolated(const fs::path &dir, conformance::Backend &backend, unsigned timeout_s) {
  int fds[2];
  if (pipe(fds) != 0)
    return {};
  pid_t pid = fork();
  if (pid < 0) {
    close(fds[0]);
    close(fds[1]);
    return {};
  }
  if (pid == 0) {
    close(fds[0]);
    PrintStackOnCrash();
    alarm(timeout_s);
    Result r;
    try {
      r = RunTest(dir, backend);
    } catch (const std::exception &e) {
      r = {Outcome::kCrashed, std::string("exception: ") + e.what()};
    }
    std::string msg = std::to_string(static_cast<int>(r.outcome)) + " " + r.detail;
    msg.resize(std::min<size_t>(msg.size(), 4000));
    ssize_t w = write(fds[1], msg.data(), msg.size());
    (void)w;
    close(fds[1]);
    _exit(0);
  }
  close(fds[1]);
  return {pid, fds[0]};
}

// Waits for a child started by StartIsolated and reads what it reported.
Result FinishIsolated(const Child &c) {
  if (c.pid < 0)
    return {Outcome::kCrashed, "fork or pipe failed"};
  std::string msg;
  char buf[4096];
  ssize_t k;
  while ((k = read(c.fd, buf, sizeof buf)) > 0)
    msg.append(buf, static_cast<size_t>(k));
  close(c.fd);
  int status = 0;
  waitpid(c.pid, &status, 0);
  if (msg.empty()) {
    if (WIFSIGNALED(status))
      return {Outcome::kCrashed, std::string("killed by signal ") + strsignal(WTERMSIG(status))};
    return {Outcome::kCrashed, "no result"};
  }
  Result r;
  r.outcome = static_cast<Outcome>(msg[0] - '0');
  r.detail = msg.size() > 2 ? msg.substr(2) : "";
  return r;
}

// Runs the tests `dirs` with up to `jobs` children at once; results in the order of `dirs`.
// Each child reports as soon as its test ends, so the one started first is awaited first and a
// slower one behind it keeps running meanwhile.
std::vector<Result> RunAllIsolated(const std::vector<fs::path> &dirs, conformance::Backend &backend,
                                   unsigned timeout_s, unsigned jobs) {
  std::vector<Result> out(dirs.size());
  std::vector<std::pair<size_t, Child>> running;
  size_t next = 0;
  while (next < dirs.size() || !running.empty()) {
    while (next < dirs.size() && running.size() < jobs) {
      running.push_back({next, StartIsolated(dirs[next], backend, timeout_s)});
      next++;
    }
    out[running.front().first] = FinishIsolated(running.front().second);
    running.erase(running.begin());
  }
  return out;
}

std::set<std::string> ReadList(const std::string &path, bool *ok) {
  std::set<std::string> names;
  std::ifstream f(path);
  *ok = static_cast<bool>(f);
  std::string line;
  while (std::getline(f, line)) {
    line.erase(std::find(line.begin(), line.end(), '#'), line.end());
    line.erase(0, line.find_first_not_of(" \t"));
    line.erase(line.find_last_not_of(" \t\r") + 1);
    if (!line.empty())
      names.insert(line);
  }
  return names;
}

}  // namespace

int main(int argc, char **argv) {
  std::string data = "/usr/share/libonnx-testdata/data";
  std::string backend_name = "reference", filter, write_dir;
  std::vector<std::string> folders = {"node", "simple", "pytorch-converted", "pytorch-operator"};
  std::vector<std::string> expect_files;
  bool verbose = false;
  unsigned timeout_s = 60;
  // Children at once: one per core (a test is one process's work, mostly its kernels' compile).
  unsigned jobs = std::max(1L, sysconf(_SC_NPROCESSORS_ONLN));
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "conformance: %s needs a value\n", a.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--data")
      data = next();
    else if (a == "--backend")
      backend_name = next();
    else if (a == "--filter")
      filter = next();
    else if (a == "--expect")
      expect_files.push_back(next());
    else if (a == "--write-passing")
      write_dir = next();
    else if (a == "--verbose" || a == "-v")
      verbose = true;
    else if (a == "--timeout")
      timeout_s = static_cast<unsigned>(std::max(1, std::atoi(next().c_str())));
    else if (a == "--jobs")
      jobs = static_cast<unsigned>(std::max(1, std::atoi(next().c_str())));
    else if (a == "--folders") {
      folders.clear();
      std::stringstream ss(next());
      std::string f;
      while (std::getline(ss, f, ','))
        folders.push_back(f);
    } else {
      std::fprintf(stderr, "conformance: unknown argument %s\n", a.c_str());
      return 2;
    }
  }
  if (!fs::is_directory(data)) {
    std::printf("SKIP: ONNX test data not found at %s (Debian package libonnx-testdata)\n",
                data.c_str());
    return 77;
  }
  auto backend = conformance::MakeBackend(backend_name);
  if (!backend.ok()) {
    std::fprintf(stderr, "conformance: %s\n", backend.status().message().c_str());
    return 2;
  }
  // With expectation lists only the listed tests run (the suite's regression check).
  std::set<std::string> expected;
  for (const std::string &f : expect_files) {
    bool ok = false;
    auto names = ReadList(f, &ok);
    if (!ok) {
      std::fprintf(stderr, "conformance: cannot read %s\n", f.c_str());
      return 2;
    }
    expected.insert(names.begin(), names.end());
  }
  int regressions = 0;
  std::printf("conformance: backend %s, data %s\n", (*backend)->name().c_str(), data.c_str());
  for (const std::string &folder : folders) {
    fs::path root = fs::path(data) / folder;
    if (!fs::is_directory(root)) {
      std::printf("%s: folder missing\n", folder.c_str());
      continue;
    }
    std::vector<std::string> tests;
    for (const auto &e : fs::directory_iterator(root))
      if (e.is_directory())
        tests.push_back(e.path().filename().string());
    std::sort(tests.begin(), tests.end());
    std::map<Outcome, int> counts;
    std::vector<std::string> passing, keys;
    std::vector<fs::path> dirs;
    for (const std::string &t : tests) {
      const std::string key = folder + "/" + t;
      if (!filter.empty() && key.find(filter) == std::string::npos)
        continue;
      if (!expected.empty() && !expected.count(key))
        continue;
      keys.push_back(key);
      dirs.push_back(root / t);
    }
    const std::vector<Result> results = RunAllIsolated(dirs, **backend, timeout_s, jobs);
    for (size_t i = 0; i < keys.size(); i++) {
      const std::string &key = keys[i];
      const Result &r = results[i];
      ++counts[r.outcome];
      if (r.outcome == Outcome::kPassed)
        passing.push_back(key);
      if (verbose || (r.outcome != Outcome::kPassed && expected.count(key)))
        std::printf("  %-60s %s%s%s\n", key.c_str(), OutcomeName(r.outcome),
                    r.detail.empty() ? "" : ": ", r.detail.c_str());
      if (r.outcome != Outcome::kPassed && expected.count(key))
        ++regressions;
    }
    const int total = counts[Outcome::kPassed] + counts[Outcome::kFailed] +
                      counts[Outcome::kUnsupported] + counts[Outcome::kCrashed];
    std::printf("%s: %d passed, %d failed, %d unsupported, %d crashed (%d tests)\n", folder.c_str(),
                counts[Outcome::kPassed], counts[Outcome::kFailed], counts[Outcome::kUnsupported],
                counts[Outcome::kCrashed], total);
    std::fflush(stdout);
    if (!write_dir.empty()) {
      // The reference lists are passing-FOLDER.txt; other backends keep their own
      // (passing-device-node.txt, ...), so writing one never overwrites another's.
      const std::string bname = (*backend)->name();
      const std::string prefix = bname == "reference" ? "passing-" : "passing-" + bname + "-";
      std::ofstream f(fs::path(write_dir) / (prefix + folder + ".txt"));
      f << "# " << folder << " tests of libonnx-testdata that pass on the " << (*backend)->name()
        << " backend\n# (written by: conformance --write-passing; checked by the 'conformance' "
           "test)\n";
      for (const std::string &p : passing)
        f << p << "\n";
    }
  }
  if (!expected.empty()) {
    std::printf("expected to pass: %zu, regressions: %d\n", expected.size(), regressions);
    return regressions ? 1 : 0;
  }
  return 0;
}
