// Times one network on one device with our runtime, for tools/bench/run.py.
//   op-bench-model MODEL [--device D] [--precision fp32|fp16] [--runs N] [--warmup W]
//                  [--cache-dir DIR|none] [--serve]
// Prints one JSON object: load time (and whether the model came from the cache or was
// compiled), milliseconds of every timed run, FLOPs per run, arena and intermediate bytes.
// A run is measured from the enqueue of the launch list to the completion of its last kernel,
// with inputs already on the device (uploaded once with random values), as an element sees it.
// With --serve it then reads counts from stdin, one per line, and answers each with one JSON
// line of that many timed runs, so tools/bench/run.py can interleave it with the peers.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "cl/device.h"
#include "cl/queue.h"
#include "nn/compiler.h"
#include "nn/executor.h"

namespace {

double NowMs() {
  return std::chrono::duration<double, std::milli>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

int Fail(const op::Status &s, const char *what) {
  std::fprintf(stderr, "op-bench-model: %s: %s\n", what, s.ToString().c_str());
  return 1;
}

}  // namespace

int main(int argc, char **argv) {
  std::string model_path, device_spec = "auto", precision = "fp32", cache_dir;
  int runs = 20, warmup = 3;
  bool serve = false;
  for (int i = 1; i < argc; i++) {
    auto next = [&]() -> const char * { return i + 1 < argc ? argv[++i] : ""; };
    if (!std::strcmp(argv[i], "--device"))
      device_spec = next();
    else if (!std::strcmp(argv[i], "--precision"))
      precision = next();
    else if (!std::strcmp(argv[i], "--runs"))
      runs = std::atoi(next());
    else if (!std::strcmp(argv[i], "--warmup"))
      warmup = std::atoi(next());
    else if (!std::strcmp(argv[i], "--cache-dir"))
      cache_dir = next();
    else if (!std::strcmp(argv[i], "--serve"))
      serve = true;
    else if (argv[i][0] == '-' || !model_path.empty())
      runs = 0;  // --help, an unknown option or a second model: the usage below
    else
      model_path = argv[i];
  }
  if (model_path.empty() || runs < 1) {
    std::fprintf(stderr,
                 "usage: op-bench-model MODEL [--device D] [--precision fp32|fp16] [--runs N] "
                 "[--warmup W] [--cache-dir DIR|none]\n");
    return 2;
  }

  auto device = op::cl::Device::Open(device_spec);
  if (!device.ok())
    return Fail(device.status(), "opening the device");
  auto prec = op::nn::ParsePrecision(precision);
  if (!prec.ok())
    return Fail(prec.status(), "precision");

  op::nn::CompileOptions options;
  options.precision = *prec;
  options.cache_dir = cache_dir;
  op::nn::LoadInfo info;
  double t0 = NowMs();
  auto model = op::nn::LoadOrCompile(model_path, **device, options, &info);
  if (!model.ok())
    return Fail(model.status(), model_path.c_str());
  const uint64_t flops = model->TotalFlops();
  const uint64_t arena = model->arena_bytes, intermediates = model->intermediate_bytes;
  const size_t kernels = model->kernels.size();
  auto exec = op::nn::Executor::Create(*device, std::move(model).value());
  if (!exec.ok())
    return Fail(exec.status(), "loading the executor");
  auto queue = op::cl::Queue::Create(**device);
  if (!queue.ok())
    return Fail(queue.status(), "creating a queue");
  const op::nn::CompiledModel &m = (*exec)->model();

  // Inputs uploaded once; outputs allocated once.
  std::vector<op::cl::MemHandle> in_bufs, out_bufs;
  std::vector<std::vector<uint8_t>> host_inputs;
  for (const auto &t : m.inputs) {
    host_inputs.push_back(op::nn::RandomInputBytes(t, uint32_t(1234 + host_inputs.size())));
    auto buf = (*device)->CreateBuffer(t.ByteSize());
    if (!buf.ok())
      return Fail(buf.status(), t.name.c_str());
    auto w = queue->Write(buf->get(), 0, t.ByteSize(), host_inputs.back().data());
    if (!w.ok())
      return Fail(w.status(), "uploading inputs");
    in_bufs.push_back(std::move(buf).value());
  }
  for (const auto &t : m.outputs) {
    auto buf = (*device)->CreateBuffer(t.ByteSize());
    if (!buf.ok())
      return Fail(buf.status(), t.name.c_str());
    out_bufs.push_back(std::move(buf).value());
  }
  if (auto s = queue->Finish(); !s.ok())
    return Fail(s, "uploading inputs");
  double load_ms = NowMs() - t0;

  std::vector<cl_mem> ins, outs;
  for (auto &b : in_bufs)
    ins.push_back(b.get());
  for (auto &b : out_bufs)
    outs.push_back(b.get());
  auto timed_runs = [&](int count, std::vector<double> *times) -> op::Status {
    for (int i = 0; i < count; i++) {
      double s = NowMs();
      auto ev = (*exec)->Run(*queue, ins.data(), ins.size(), outs.data(), outs.size());
      if (!ev.ok())
        return ev.status();
      // The benchmark's one host wait: the run is over when its last kernel is.
      OP_RETURN_IF_ERROR(op::cl::WaitForEvent(ev->get()));
      if (times)
        times->push_back(NowMs() - s);
    }
    return op::Status::Ok();
  };
  if (auto s = timed_runs(warmup, nullptr); !s.ok())
    return Fail(s, "running");
  std::vector<double> times;
  if (auto s = timed_runs(serve ? 0 : runs, &times); !s.ok())
    return Fail(s, "running");

  std::printf("{\"model\": \"%s\", \"device\": \"%s\", \"precision\": \"%s\", ", model_path.c_str(),
              (*device)->caps().device_name.c_str(), precision.c_str());
  std::printf("\"from_cache\": %s, \"compiled\": %s, \"load_ms\": %.3f, ",
              info.from_cache ? "true" : "false", info.compiled ? "true" : "false", load_ms);
  std::printf("\"flops\": %llu, \"arena_bytes\": %llu, \"intermediate_bytes\": %llu, ",
              (unsigned long long)flops, (unsigned long long)arena,
              (unsigned long long)intermediates);
  std::printf("\"kernels\": %zu, \"runs_ms\": [", kernels);
  for (size_t i = 0; i < times.size(); i++)
    std::printf("%s%.4f", i ? ", " : "", times[i]);
  std::printf("]}\n");
  std::fflush(stdout);
  char line[64];
  while (serve && std::fgets(line, sizeof(line), stdin)) {
    std::vector<double> batch;
    if (auto s = timed_runs(std::atoi(line), &batch); !s.ok())
      return Fail(s, "running");
    std::printf("[");
    for (size_t i = 0; i < batch.size(); i++)
      std::printf("%s%.4f", i ? ", " : "", batch[i]);
    std::printf("]\n");
    std::fflush(stdout);
  }
  return 0;
}
