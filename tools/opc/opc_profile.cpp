// opc profile: where a compiled model spends its device time. Runs the model on a profiling
// queue with random inputs and reports every launch's median device time (start to end of the
// kernel, not queueing), its share of the run and its FLOP rate, then the same by kernel
// template. This is the tool for deciding which kernel to optimise next; --source N prints the
// generated source of launch N instead. --peak G (the machine's FMA peak in GFLOP/s, as
// op-peak-flops measures it) adds each launch's share of that peak. The fastest run of each
// launch is printed beside the median: on a machine shared with other work the median moves
// with the load, the fastest run much less.
#include <cerrno>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <map>

#include "cl/device.h"
#include "cl/queue.h"
#include "nn/compiler.h"
#include "nn/executor.h"
#include "opc.h"

namespace opc {
namespace {

using op::Status;
namespace nn = op::nn;
namespace cl = op::cl;

double Median(std::vector<double> v) {
  if (v.empty())
    return 0;
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

std::string Shorten(const std::string &s, size_t n) {
  return s.size() <= n ? s : s.substr(0, n - 3) + "...";
}

std::string Grid(const nn::KernelDesc &k) {
  std::string g;
  for (uint64_t d : k.global)
    g += (g.empty() ? "" : "x") + std::to_string(d);
  if (!k.local.empty()) {
    g += "/";
    for (size_t i = 0; i < k.local.size(); i++)
      g += (i ? "x" : "") + std::to_string(k.local[i]);
  }
  return g;
}

}  // namespace

int Profile(const Args &args) {
  std::string model, device = "auto", precision = "auto";
  int runs = 10, top = 25, show = -1;
  double peak = 0;  // GFLOP/s; 0: not given
  nn::CompileOptions options;
  for (size_t i = 0; i < args.size(); i++) {
    const std::string &a = args[i];
    bool has_value = i + 1 < args.size();
    if ((a == "--device" || a == "--precision" || a == "--shape" || a == "--runs" || a == "--top" ||
         a == "--source" || a == "--peak") &&
        !has_value)
      return Fail(op::InvalidArgument("profile: " + a + " needs a value"));
    if (a == "--device") {
      device = args[++i];
    } else if (a == "--precision") {
      precision = args[++i];
    } else if (a == "--runs" || a == "--source" || a == "--top") {
      // Whole numbers only: "abc" or "5x" is an error, not a silent default.
      const std::string &v = args[++i];
      char *end = nullptr;
      errno = 0;
      const long n = std::strtol(v.c_str(), &end, 10);
      const long lowest = a == "--source" ? 0 : 1;
      if (v.empty() || *end != '\0' || errno == ERANGE || n < lowest || n > 1000000)
        return Fail(op::InvalidArgument("profile: " + a + " '" + v +
                                        "' is not a whole number from " + std::to_string(lowest) +
                                        " to 1000000"));
      (a == "--runs" ? runs : a == "--top" ? top : show) = static_cast<int>(n);
    } else if (a == "--peak") {
      const std::string &v = args[++i];
      char *end = nullptr;
      errno = 0;
      peak = std::strtod(v.c_str(), &end);
      if (v.empty() || *end != '\0' || errno == ERANGE || !(peak > 0) || peak > 1e9)
        return Fail(
            op::InvalidArgument("profile: --peak '" + v + "' is not a positive number of GFLOP/s"));
    } else if (a == "--shape") {
      Status st = nn::ParseShapeBinding(args[++i], &options.shapes);
      if (!st.ok())
        return Fail(st);
    } else if (model.empty() && !a.empty() && a[0] != '-') {
      model = a;
    } else {
      return Fail(op::InvalidArgument("profile: unexpected argument '" + a + "'"));
    }
  }
  if (model.empty())
    return Fail(
        op::InvalidArgument("profile: usage: opc profile MODEL [--runs N] [--top K] [--peak "
                            "GFLOPS] [--source LAUNCH]"));
  Status prec = nn::SetPrecision(precision, nn::Precision::kFp32, &options);
  if (!prec.ok())
    return Fail(prec);
  auto dev = cl::Device::Open(device);
  if (!dev.ok())
    return Fail(dev.status());
  auto now_ms = [] {
    return std::chrono::duration<double, std::milli>(
               std::chrono::steady_clock::now().time_since_epoch())
        .count();
  };
  const double t_compile = now_ms();
  auto compiled = nn::LoadOrCompile(model, **dev, options);
  const double compile_ms = now_ms() - t_compile;
  if (!compiled.ok())
    return Fail(compiled.status());
  cl::ProgressLine progress("opc");
  auto exec = nn::Executor::Create(*dev, std::move(*compiled), progress.For(model));
  if (!exec.ok())
    return Fail(exec.status());
  const nn::CompiledModel &m = (*exec)->model();
  if (show >= 0) {
    if (static_cast<size_t>(show) >= m.kernels.size())
      return Fail(op::InvalidArgument("profile: --source " + std::to_string(show) +
                                      ": the model has " + std::to_string(m.kernels.size()) +
                                      " launches"));
    const nn::KernelDesc &k = m.kernels[show];
    std::printf("launch %d: %s, %s, grid %s\n%s\n", show, k.label.c_str(), k.entry.c_str(),
                Grid(k).c_str(), m.sources[k.source].c_str());
    return 0;
  }
  auto queue = cl::Queue::Create(**dev, /*profiling=*/true);
  if (!queue.ok())
    return Fail(queue.status());

  // Random inputs, outputs into scratch buffers.
  std::vector<cl::MemHandle> ins, outs;
  std::vector<cl_mem> in_mems, out_mems;
  for (const nn::TensorDesc &t : m.inputs) {
    std::vector<uint8_t> bytes = nn::RandomInputBytes(t, uint32_t(1 + ins.size()));
    bytes.resize(std::max<size_t>(bytes.size(), 4));
    auto mem = (*dev)->CreateBuffer(bytes.size());
    if (!mem.ok())
      return Fail(mem.status());
    auto ev = queue->Write(mem->get(), 0, bytes.size(), bytes.data());
    if (!ev.ok() || !cl::WaitForEvent(ev->get()).ok())
      return Fail(op::Internal("profile: cannot upload input '" + t.name + "'"));
    in_mems.push_back(mem->get());
    ins.push_back(std::move(*mem));
  }
  for (const nn::TensorDesc &t : m.outputs) {
    auto mem = (*dev)->CreateBuffer(std::max<uint64_t>(t.ByteSize(), 4));
    if (!mem.ok())
      return Fail(mem.status());
    out_mems.push_back(mem->get());
    outs.push_back(std::move(*mem));
  }

  // One warm-up run, then `runs` profiled runs, each waited for so launches do not overlap.
  std::vector<std::vector<double>> ms(m.kernels.size());
  std::vector<double> totals;
  double first_run_ms = 0;
  for (int r = -1; r < runs; r++) {
    const double t_run = now_ms();
    std::vector<cl::EventHandle> events;
    auto last = (*exec)->Run(*queue, in_mems.data(), in_mems.size(), out_mems.data(),
                             out_mems.size(), {}, &events);
    if (!last.ok())
      return Fail(last.status());
    Status st = cl::WaitForEvent(last->get());
    if (!st.ok())
      return Fail(st);
    if (r < 0) {
      first_run_ms = now_ms() - t_run;
      continue;
    }
    double total = 0;
    for (size_t k = 0; k < events.size() && k < ms.size(); k++) {
      double t = cl::EventDurationNs(events[k].get()) / 1e6;
      ms[k].push_back(t);
      total += t;
    }
    totals.push_back(total);
  }

  struct Row {
    size_t index;
    double ms, best;
  };
  std::vector<Row> rows;
  double sum = 0;
  for (size_t k = 0; k < ms.size(); k++) {
    rows.push_back(
        {k, Median(ms[k]), ms[k].empty() ? 0.0 : *std::min_element(ms[k].begin(), ms[k].end())});
    sum += rows.back().ms;
  }
  // Share of the peak, or blank without --peak.
  auto of_peak = [&](double gflops) -> std::string {
    if (peak <= 0)
      return "";
    char buf[32];
    std::snprintf(buf, sizeof(buf), "%6.1f%%", 100 * gflops / peak);
    return buf;
  };
  std::sort(rows.begin(), rows.end(), [](const Row &a, const Row &b) { return a.ms > b.ms; });
  auto rate = [](uint64_t flops, double t) { return t > 0 ? flops / (t * 1e6) : 0.0; };

  std::printf("profile: %s on %s, %s storage, %d runs, %zu launches\n", model.c_str(),
              (*dev)->caps().device_name.c_str(), m.precision.c_str(), runs, m.kernels.size());
  // Start-up, wall time: the model (an .opm read, or ONNX compiled or read from the model cache),
  // then the executor's parts, then the first run (PoCL compiles each kernel's work-group
  // function at its first launch unless its cache holds it).
  const nn::Executor::LoadTimes &lt = (*exec)->load_times();
  const cl::ProgramCache::Stats ps = (*dev)->programs().stats();
  std::printf(
      "start-up: model %.1f ms, buffers %.1f ms, %zu programs %.1f ms (%d compiled, %d linked, "
      "%d from the binary cache%s; thread time: compile %.1f ms, link %.1f ms, store %.1f ms, "
      "load %.1f ms), kernels %.1f ms, first run %.1f ms\n",
      compile_ms, lt.buffers_ms, lt.programs, lt.programs_ms, ps.builds, ps.links, ps.disk_hits,
      ps.helpers ? " (a helper process built into it meanwhile)" : "", ps.build_ms, ps.link_ms,
      ps.store_ms, ps.load_ms, lt.kernels_ms, first_run_ms);
  std::printf(
      "device time per run: median %.2f ms (sum of kernel medians %.2f ms), %s, %.2f "
      "GFLOP/s\n",
      Median(totals), sum, FormatCount(static_cast<double>(m.TotalFlops()), "FLOP").c_str(),
      rate(m.TotalFlops(), Median(totals)));
  if (peak > 0)
    std::printf("peak: %.1f GFLOP/s (--peak); %% peak = the launch's GFLOP/s at its median\n",
                peak);
  std::printf("\n%4s %9s %9s %6s %8s %7s  %-16s %-20s %s\n", "#", "ms", "best ms", "share",
              "GFLOP/s", peak > 0 ? "% peak" : "", "template", "grid", "node");
  for (size_t i = 0; i < rows.size() && i < static_cast<size_t>(top); i++) {
    const nn::KernelDesc &k = m.kernels[rows[i].index];
    const double r = rate(k.flops, rows[i].ms);
    std::printf("%4zu %9.3f %9.3f %5.1f%% %8.2f %7s  %-16s %-20s %s\n", rows[i].index, rows[i].ms,
                rows[i].best, sum > 0 ? 100 * rows[i].ms / sum : 0.0, r, of_peak(r).c_str(),
                Shorten(k.entry, 16).c_str(), Shorten(Grid(k), 20).c_str(),
                Shorten(k.label, 60).c_str());
  }
  if (rows.size() > static_cast<size_t>(top))
    std::printf("     (%zu more launches; --top K shows more)\n", rows.size() - top);

  struct Group {
    int count = 0;
    double ms = 0;
    uint64_t flops = 0;
  };
  std::map<std::string, Group> groups;
  for (const Row &r : rows) {
    Group &g = groups[m.kernels[r.index].entry];
    g.count++;
    g.ms += r.ms;
    g.flops += m.kernels[r.index].flops;
  }
  std::vector<std::pair<std::string, Group>> by_time(groups.begin(), groups.end());
  std::sort(by_time.begin(), by_time.end(),
            [](const auto &a, const auto &b) { return a.second.ms > b.second.ms; });
  std::printf("\n%-20s %8s %9s %6s %8s %7s\n", "template", "launches", "ms", "share", "GFLOP/s",
              peak > 0 ? "% peak" : "");
  for (const auto &[name, g] : by_time)
    std::printf("%-20s %8d %9.3f %5.1f%% %8.2f %7s\n", Shorten(name, 20).c_str(), g.count, g.ms,
                sum > 0 ? 100 * g.ms / sum : 0.0, rate(g.flops, g.ms),
                of_peak(rate(g.flops, g.ms)).c_str());
  return 0;
}

}  // namespace opc
