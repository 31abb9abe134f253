// The memory plan, the compiled-model file (round trip, truncation, bit flips, hostile
// fields), and the executor's run-time contract (same result twice, nothing allocated per run).
#include <gtest/gtest.h>

#include <unistd.h>

#include <atomic>
#include <fstream>
#include <cstdlib>
#include <map>
#include <new>
#include <set>

#include "graph_builder.h"
#include "nn/compiler.h"
#include "nn/onnx_import.h"
#include "nn/passes.h"
#include "nn/plan.h"

// Counts allocations, to check that Executor::Run allocates nothing on the host.
static std::atomic<long> g_allocations{0};
void CountAllocation() {
  g_allocations++;
}
#include "../common/malloc_new.h"

using namespace op;
using namespace op::nn;
using namespace op::nn::testing;

namespace {

std::string SourceRoot() {
  const char *r = std::getenv("OP_SOURCE_ROOT");
  return r ? r : ".";
}

// A committed model (models/NAME), imported, shape-inferred and optimised as the compiler does.
void LoadOptimized(const std::string &name, Graph *g) {
  auto r = ImportOnnxFile(SourceRoot() + "/models/" + name);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  *g = std::move(*r);
  ASSERT_TRUE(InferShapes(*g).ok());
  ASSERT_TRUE(OptimizeGraph(*g).ok());
}

// Random pixels for every input of `g` (uint8 images, as the vision models take).
void RandomImages(const Graph &g, uint64_t seed, std::vector<Tensor> *feeds) {
  Rng rng(seed);
  for (TensorId id : g.inputs) {
    const Tensor &t = g.tensor(id);
    ASSERT_EQ(t.dtype, DType::kUInt8) << t.name;
    Bytes b(t.ByteSize());
    for (uint8_t &v : b)
      v = static_cast<uint8_t>(rng.Uniform(0, 256));
    feeds->push_back(MakeConstant(t.dtype, t.shape, b));
    feeds->back().name = t.name;
  }
}

// Every output of two runs, element by element, within `tol` (0: equal).
void ExpectSameOutputs(const std::vector<Tensor> &a, const std::vector<Tensor> &b, float tol,
                       const std::string &what) {
  ASSERT_EQ(a.size(), b.size()) << what;
  for (size_t o = 0; o < a.size(); o++) {
    ASSERT_EQ(a[o].shape, b[o].shape) << what;
    for (int64_t i = 0; i < a[o].shape.NumElements(); i++)
      ASSERT_NEAR(ToFloat(a[o], static_cast<size_t>(i)), ToFloat(b[o], static_cast<size_t>(i)), tol)
          << what << ": output " << o << " element " << i;
  }
}

// --- memory plan

TEST(Plan, SequentialTensorsShareOneSlot) {
  std::vector<Lifetime> t = {{1000, 0, 1}, {1000, 1, 2}, {1000, 2, 3}, {1000, 3, 4}};
  auto plan = PlanMemory(t, 128);
  ASSERT_TRUE(plan.ok());
  EXPECT_TRUE(CheckPlan(t, *plan, 128).ok());
  // A chain a→b→c→d needs two live tensors at a time.
  EXPECT_EQ(plan->arena_bytes, 2u * 1024);
  EXPECT_EQ(plan->total_bytes, 4u * 1024);
}

TEST(Plan, RandomLifetimesNeverOverlapWhileAlive) {
  Rng rng(3);
  for (int trial = 0; trial < 50; trial++) {
    std::vector<Lifetime> t;
    int n = 5 + trial;
    for (int i = 0; i < n; i++) {
      int first = static_cast<int>(rng.Uniform(0, 40));
      int len = static_cast<int>(rng.Uniform(0, 10));
      t.push_back({static_cast<uint64_t>(rng.Uniform(1, 5000)), first, first + len});
    }
    auto plan = PlanMemory(t, 64);
    ASSERT_TRUE(plan.ok());
    Status st = CheckPlan(t, *plan, 64);
    EXPECT_TRUE(st.ok()) << st.ToString();
    EXPECT_LE(plan->arena_bytes, plan->total_bytes);
  }
}

TEST(Plan, CheckFindsAnOverlapAndBadInputsAreErrors) {
  std::vector<Lifetime> t = {{256, 0, 2}, {256, 1, 3}};
  MemoryPlan bad;
  bad.offsets = {0, 128};
  bad.arena_bytes = 512;
  EXPECT_EQ(CheckPlan(t, bad, 128).code(), StatusCode::kCorrupt);
  EXPECT_FALSE(PlanMemory(t, 100).ok());            // not a power of two
  EXPECT_FALSE(PlanMemory({{10, 3, 1}}, 64).ok());  // ends before it starts
}

TEST(Plan, ModelPlanIsValidAndSmallerThanTheSum) {
  Graph g;
  ASSERT_NO_FATAL_FAILURE(LoadOptimized("driving_vision_small.onnx", &g));
  for (Precision p : {Precision::kFp32, Precision::kFp16}) {
    auto opt = OptionsForProfile("cpu", p);
    ASSERT_TRUE(opt.ok());
    CodegenReport report;
    auto m = GenerateCode(g, *opt, &report);
    ASSERT_TRUE(m.ok()) << m.status().ToString();
    EXPECT_FALSE(report.lifetimes.empty());
    Status st = CheckPlan(report.lifetimes, report.plan, opt->alignment);
    EXPECT_TRUE(st.ok()) << st.ToString();
    EXPECT_LT(m->arena_bytes, m->intermediate_bytes);
    EXPECT_EQ(m->arena_bytes, report.plan.arena_bytes);
  }
}

// --- the compiled-model file

CompiledModel PolicyModel(Precision p = Precision::kFp32) {
  auto opt = OptionsForProfile("cpu", p);
  CompileOptions co;
  co.precision = p;
  auto m = CompileOnnxFile(SourceRoot() + "/models/driving_policy_small.onnx", *opt, co);
  EXPECT_TRUE(m.ok()) << m.status().ToString();
  return m.ok() ? *m : CompiledModel{};
}

TEST(ModelFile, RoundTripKeepsEverything) {
  CompiledModel m = PolicyModel();
  ASSERT_FALSE(m.kernels.empty());
  auto bytes = SerializeModel(m);
  ASSERT_TRUE(bytes.ok()) << bytes.status().ToString();
  auto back = ParseModel(*bytes, "policy.opm");
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->kernels.size(), m.kernels.size());
  EXPECT_EQ(back->sources, m.sources);
  EXPECT_EQ(back->weights, m.weights);
  EXPECT_EQ(back->arena_bytes, m.arena_bytes);
  EXPECT_EQ(back->source_hash, m.source_hash);
  ASSERT_EQ(back->outputs.size(), 1u);
  EXPECT_EQ(back->outputs[0].slices.size(), m.outputs[0].slices.size());
  EXPECT_FALSE(back->outputs[0].slices.empty());
  for (size_t k = 0; k < m.kernels.size(); k++) {
    ASSERT_EQ(back->kernels[k].args.size(), m.kernels[k].args.size());
    EXPECT_EQ(back->kernels[k].global, m.kernels[k].global);
    for (size_t a = 0; a < m.kernels[k].args.size(); a++)
      EXPECT_EQ(back->kernels[k].args[a].buffer.offset, m.kernels[k].args[a].buffer.offset);
  }
  auto again = SerializeModel(*back);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(*again, *bytes);
}

// A compiled model records the host processor extensions its kernels use; loading it where
// one is missing is refused with what to do (the kernel would stop the process), and the field
// survives the file.
TEST(ModelFile, MissingProcessorFeaturesAreRefused) {
  Device &dev = TestDevice();
  ASSERT_TRUE(dev.device);
  CompiledModel m = PolicyModel();
  ASSERT_FALSE(m.kernels.empty());
  const std::string path = ::testing::TempDir() + "/features-" + std::to_string(getpid()) + ".opm";
  auto write = [&](const std::string &features) {
    m.cpu_features = features;
    auto bytes = SerializeModel(m);
    ASSERT_TRUE(bytes.ok());
    std::ofstream f(path, std::ios::binary | std::ios::trunc);
    f << *bytes;
  };
  CompileOptions o;
  o.auto_precision = true;
  write("");
  EXPECT_TRUE(LoadOrCompile(path, *dev.device, o).ok());
  write(HostHasAvx512Vnni() ? "avx512vnni,amx-int9" : "avx512vnni");
  auto refused = LoadOrCompile(path, *dev.device, o);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().ToString().find("compile the ONNX model again"), std::string::npos)
      << refused.status().ToString();
  EXPECT_NE(refused.status().ToString().find(HostHasAvx512Vnni() ? "amx-int9" : "avx512vnni"),
            std::string::npos);
  auto back = ReadModelFile(path);
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(back->cpu_features, m.cpu_features);
  std::remove(path.c_str());
}

TEST(ModelFile, TruncationsAndBitFlipsAreErrors) {
  auto bytes = SerializeModel(PolicyModel());
  ASSERT_TRUE(bytes.ok());
  for (size_t n : {size_t{0}, size_t{3}, size_t{11}, size_t{12}, size_t{100}, bytes->size() / 2,
                   bytes->size() - 8, bytes->size() - 1}) {
    auto r = ParseModel(bytes->substr(0, n), "t.opm");
    ASSERT_FALSE(r.ok()) << "truncated to " << n;
    EXPECT_EQ(r.status().code(), StatusCode::kCorrupt);
    EXPECT_NE(r.status().message().find("t.opm"), std::string::npos);
  }
  Rng rng(11);
  for (int i = 0; i < 300; i++) {
    std::string b = *bytes;
    size_t pos = static_cast<size_t>(rng.Uniform(0, static_cast<float>(b.size())));
    b[pos] = static_cast<char>(b[pos] ^ (1 << (i % 8)));
    auto r = ParseModel(b, "f.opm");
    ASSERT_FALSE(r.ok()) << "bit flip at " << pos;
    EXPECT_EQ(r.status().code(), StatusCode::kCorrupt);
  }
}

// Bit flips behind a recomputed checksum reach the Cap'n Proto reader and the validator: every
// outcome is an error or a model that passes validation, never a crash.
TEST(ModelFile, FlipsBehindAValidChecksumNeverCrash) {
  auto bytes = SerializeModel(PolicyModel());
  ASSERT_TRUE(bytes.ok());
  Rng rng(5);
  int errors = 0;
  for (int i = 0; i < 400; i++) {
    std::string b = *bytes;
    for (int f = 0; f < 1 + i % 4; f++) {
      size_t pos = 12 + static_cast<size_t>(rng.Uniform(0, static_cast<float>(b.size() - 12)));
      b[pos] = static_cast<char>(b[pos] ^ (1 << ((i + f) % 8)));
    }
    uint64_t sum = ModelChecksum(std::string_view(b).substr(12));
    for (int k = 0; k < 8; k++)
      b[4 + k] = static_cast<char>((sum >> (8 * k)) & 0xff);
    auto r = ParseModel(b, "x.opm");
    if (!r.ok())
      errors++;
    else
      EXPECT_TRUE(ValidateModel(*r).ok());
  }
  EXPECT_GT(errors, 0);
}

// Files of the earlier formats (checksummed byte by byte, then in one chain of words) are
// refused with what to do about them.
TEST(ModelFile, EarlierFormatsAreNamed) {
  auto bytes = SerializeModel(PolicyModel());
  ASSERT_TRUE(bytes.ok());
  ASSERT_EQ(bytes->substr(0, 4), "OPM3");
  for (char version : {'1', '2'}) {
    std::string b = *bytes;
    b[3] = version;
    ASSERT_TRUE(LooksLikeModelFile(b));
    auto r = ParseModel(b, "old.opm");
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), StatusCode::kCorrupt);
    EXPECT_NE(r.status().message().find(std::string("older build (OPM") + version),
              std::string::npos)
        << r.status().message();
  }
}

// The checksum reads words little-endian into four chains, then the words left over and the
// last partial word byte by byte: a change to any byte, in any chain or the tail, changes it,
// and so does moving a word from one chain to another.
TEST(ModelFile, ChecksumSeesEveryByte) {
  for (size_t size : {21, 101}) {  // no whole block; three blocks, a word and 5 bytes
    std::string p(size, '\x5a');
    const uint64_t base = ModelChecksum(p);
    for (size_t i = 0; i < p.size(); i++) {
      for (int bit = 0; bit < 8; bit++) {
        std::string q = p;
        q[i] = static_cast<char>(q[i] ^ (1 << bit));
        EXPECT_NE(ModelChecksum(q), base) << size << " bytes, byte " << i << " bit " << bit;
      }
    }
    EXPECT_NE(ModelChecksum(p.substr(0, size - 1)), base);
  }
  std::string a(64, '\0'), b(64, '\0');
  a[0] = 1;  // word 0: chain 0
  b[8] = 1;  // word 1: chain 1
  EXPECT_NE(ModelChecksum(a), ModelChecksum(b));
}

TEST(ModelFile, HostileFieldsAreNamedErrors) {
  CompiledModel good = PolicyModel();
  ASSERT_TRUE(ValidateModel(good).ok());
  size_t k = 0, a = 0;
  for (; k < good.kernels.size(); k++) {
    for (a = 0; a < good.kernels[k].args.size(); a++)
      if (good.kernels[k].args[a].kind == KernelArg::Kind::kBuffer &&
          good.kernels[k].args[a].buffer.kind == BufferKind::kArena)
        break;
    if (a < good.kernels[k].args.size())
      break;
  }
  ASSERT_LT(k, good.kernels.size());
  struct Edit {
    const char *expect;
    std::function<void(CompiledModel &)> apply;
  };
  std::vector<Edit> edits = {
      {"leaves the arena",
       [&](CompiledModel &m) { m.kernels[k].args[a].buffer.offset = m.arena_bytes; }},
      {"leaves the arena", [&](CompiledModel &m) { m.kernels[k].args[a].buffer.size = ~0ull; }},
      {"element size", [&](CompiledModel &m) { m.kernels[k].args[a].buffer.element_bytes = 3; }},
      {"refers to source", [&](CompiledModel &m) { m.kernels[k].source = 9999; }},
      {"global size", [&](CompiledModel &m) { m.kernels[k].global[0] = 0; }},
      {"entry point", [&](CompiledModel &m) { m.kernels[k].entry = "x; evil()"; }},
      {"refers to input",
       [&](CompiledModel &m) {
         m.kernels[k].args[a].buffer.kind = BufferKind::kInput;
         m.kernels[k].args[a].buffer.index = 77;
       }},
      {"format version", [&](CompiledModel &m) { m.format_version = 99; }},
      {"alignment", [&](CompiledModel &m) { m.alignment = 100; }},
      {"dim", [&](CompiledModel &m) { m.inputs[0].dims[0] = -4; }},
      {"slice", [&](CompiledModel &m) { m.outputs[0].slices[0].end = 1 << 30; }},
      {"leaves the weights",
       [&](CompiledModel &m) {
         m.images.push_back({m.weights.size(), 4, 4, false});
       }},
  };
  for (const Edit &e : edits) {
    CompiledModel m = good;
    e.apply(m);
    Status st = ValidateModel(m);
    ASSERT_FALSE(st.ok()) << e.expect;
    EXPECT_EQ(st.code(), StatusCode::kCorrupt);
    EXPECT_NE(st.message().find(e.expect), std::string::npos) << st.message();
    EXPECT_FALSE(SerializeModel(m).ok()) << e.expect;  // never written either
  }
}

TEST(ModelFile, ExecutorRefusesArgumentsThatDoNotMatchTheKernel) {
  Device &dev = TestDevice();
  ASSERT_TRUE(dev.device);
  CompiledModel m = PolicyModel();
  // Drop one scalar-free buffer argument from a kernel: the offsets still validate, the kernel's
  // own argument list no longer matches.
  m.kernels[0].args.pop_back();
  auto e = Executor::Create(dev.device, m);
  ASSERT_FALSE(e.ok());
  EXPECT_NE(e.status().message().find("arguments"), std::string::npos) << e.status().ToString();
}

// --- executor

TEST(Executor, RunsTwiceWithTheSameResultAndAllocatesNothingPerRun) {
  Device &dev = TestDevice();
  ASSERT_TRUE(dev.device);
  auto exec = Executor::Create(dev.device, PolicyModel());
  ASSERT_TRUE(exec.ok()) << exec.status().ToString();
  const CompiledModel &m = (*exec)->model();
  std::vector<cl::MemHandle> ins, outs;
  std::vector<cl_mem> in_mems, out_mems;
  Rng rng(9);
  for (const TensorDesc &t : m.inputs) {
    ASSERT_EQ(t.dtype, DType::kFloat32);
    std::vector<float> v(static_cast<size_t>(t.NumElements()));
    for (float &x : v)
      x = rng.Uniform(-1, 1);
    auto buf = dev.device->CreateBuffer(t.ByteSize());
    ASSERT_TRUE(buf.ok());
    ASSERT_TRUE(dev.queue.Write(buf->get(), 0, t.ByteSize(), v.data()).ok());
    ASSERT_TRUE(dev.queue.Finish().ok());
    in_mems.push_back(buf->get());
    ins.push_back(std::move(*buf));
  }
  for (const TensorDesc &t : m.outputs) {
    auto buf = dev.device->CreateBuffer(t.ByteSize());
    ASSERT_TRUE(buf.ok());
    out_mems.push_back(buf->get());
    outs.push_back(std::move(*buf));
  }
  std::vector<std::vector<float>> results;
  for (int run = 0; run < 3; run++) {
    long before = g_allocations.load();
    auto done =
        (*exec)->Run(dev.queue, in_mems.data(), in_mems.size(), out_mems.data(), out_mems.size());
    long allocated = g_allocations.load() - before;
    ASSERT_TRUE(done.ok()) << done.status().ToString();
    // The first launch of each kernel may let the driver finish compiling it (PoCL builds its
    // work-group functions with LLVM, in C++, at first enqueue); from then on nothing.
    if (run > 0) {
      EXPECT_EQ(allocated, 0) << "host allocations in run " << run;
    }
    ASSERT_TRUE(cl::WaitForEvent(done->get()).ok());
    std::vector<float> out(static_cast<size_t>(m.outputs[0].NumElements()));
    ASSERT_TRUE(dev.queue.Read(out_mems[0], 0, m.outputs[0].ByteSize(), out.data()).ok());
    ASSERT_TRUE(dev.queue.Finish().ok());
    results.push_back(out);
  }
  EXPECT_EQ(results[0], results[1]);
  EXPECT_EQ(results[0], results[2]);
}

TEST(Executor, WrongBuffersAreErrors) {
  Device &dev = TestDevice();
  ASSERT_TRUE(dev.device);
  auto exec = Executor::Create(dev.device, PolicyModel());
  ASSERT_TRUE(exec.ok());
  auto small = dev.device->CreateBuffer(16);
  ASSERT_TRUE(small.ok());
  std::vector<cl_mem> in((*exec)->model().inputs.size(), small->get());
  std::vector<cl_mem> out((*exec)->model().outputs.size(), small->get());
  auto r = (*exec)->Run(dev.queue, in.data(), in.size(), out.data(), out.size());
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("bytes"), std::string::npos);
  r = (*exec)->Run(dev.queue, in.data(), 1, out.data(), out.size());
  EXPECT_FALSE(r.ok());
}

// Every profile's code builds and runs on this device where the device has what the profile
// needs (fp16 storage through vload_half everywhere; fp16 arithmetic only with cl_khr_fp16).
TEST(Profiles, EveryProfilesCodeRunsWhereTheDeviceAllows) {
  Device &dev = TestDevice();
  ASSERT_TRUE(dev.device);
  Graph g;
  ASSERT_NO_FATAL_FAILURE(LoadOptimized("driving_policy_small.onnx", &g));
  int ran = 0;
  for (const char *profile : {"adreno", "amd", "other", "cpu"})
    for (Precision p : {Precision::kFp32, Precision::kFp16}) {
      auto opt = OptionsForProfile(profile, p);
      ASSERT_TRUE(opt.ok());
      if (opt->fp16_compute && !dev.device->caps().fp16)
        continue;  // half arithmetic cannot build here; covered on devices with cl_khr_fp16
      auto m = GenerateCode(g, *opt);
      ASSERT_TRUE(m.ok()) << profile << ": " << m.status().ToString();
      EXPECT_EQ(m->profile, profile);
      auto e = Executor::Create(dev.device, *m);
      ASSERT_TRUE(e.ok()) << profile << ": " << e.status().ToString();
      ran++;
    }
  EXPECT_GE(ran, 7);
}

// A GPU that is neither Adreno nor AMD (NVIDIA, Intel, Mali) gets the GPU kernels, recorded as
// profile "other", not the CPU profile's register blocks; a device of no profile that is not a
// GPU gets the CPU profile. The GPU kernels give the CPU profile's values here.
TEST(Profiles, AGpuOfNoProfileOfOursGetsTheGpuKernels) {
  cl::Capabilities gpu;
  gpu.device_name = "NVIDIA H200";
  gpu.device_vendor = "NVIDIA Corporation";
  gpu.is_gpu = true;
  gpu.fp16 = true;
  gpu.images = true;
  gpu.base_address_align_bits = 4096;
  gpu.native_float_lanes = 1;
  for (Precision p : {Precision::kFp32, Precision::kFp16}) {
    CodegenOptions o = OptionsForDevice(gpu, p);
    EXPECT_EQ(o.profile, cl::Profile::kOther);
    EXPECT_FALSE(o.image_weights);
    EXPECT_FALSE(o.fp16_compute);
    EXPECT_FALSE(o.int8_dot);
    EXPECT_EQ(o.alignment, 512u);
  }
  cl::Capabilities accel = gpu;
  accel.is_gpu = false;
  EXPECT_EQ(OptionsForDevice(accel, Precision::kFp32).profile, cl::Profile::kCpu);

  Device &dev = TestDevice();
  ASSERT_TRUE(dev.device);
  Graph g;
  ASSERT_NO_FATAL_FAILURE(LoadOptimized("driving_vision_small.onnx", &g));
  std::vector<Tensor> feeds;
  ASSERT_NO_FATAL_FAILURE(RandomImages(g, 22, &feeds));
  std::vector<std::vector<Tensor>> results;
  for (const char *profile : {"cpu", "other"}) {
    auto opt = OptionsForProfile(profile, Precision::kFp32);
    ASSERT_TRUE(opt.ok());
    auto m = GenerateCode(g, *opt);
    ASSERT_TRUE(m.ok()) << m.status().ToString();
    EXPECT_EQ(m->profile, profile);
    auto e = Executor::Create(dev.device, *m);
    ASSERT_TRUE(e.ok()) << profile << ": " << e.status().ToString();
    auto out = (*e)->RunHost(dev.queue, feeds);
    ASSERT_TRUE(out.ok()) << out.status().ToString();
    results.push_back(*out);
  }
  ExpectSameOutputs(results[0], results[1], 1e-5f, "cpu against other");
}

}  // namespace

namespace {

// The adreno profile's image2d weights give the same results as buffer weights (the same
// values through the texture path; PoCL has images), for fp32 and half storage.
TEST(Profiles, ImageWeightsMatchBufferWeights) {
  Device &dev = TestDevice();
  ASSERT_TRUE(dev.device);
  if (!dev.device->caps().images)
    GTEST_SKIP() << "no image support";
  Graph g;
  ASSERT_NO_FATAL_FAILURE(LoadOptimized("driving_vision_small.onnx", &g));
  std::vector<Tensor> feeds;
  ASSERT_NO_FATAL_FAILURE(RandomImages(g, 21, &feeds));
  for (Precision p : {Precision::kFp32, Precision::kFp16}) {
    std::vector<std::vector<Tensor>> results;
    for (const char *profile : {"cpu", "adreno"}) {
      auto opt = OptionsForProfile(profile, p);
      ASSERT_TRUE(opt.ok());
      opt->fp16_compute = opt->fp16_compute && dev.device->caps().fp16;
      auto m = GenerateCode(g, *opt);
      ASSERT_TRUE(m.ok()) << m.status().ToString();
      if (std::string(profile) == "adreno") {
        EXPECT_FALSE(m->images.empty());
      }
      auto e = Executor::Create(dev.device, *m);
      ASSERT_TRUE(e.ok()) << profile << ": " << e.status().ToString();
      auto out = (*e)->RunHost(dev.queue, feeds);
      ASSERT_TRUE(out.ok()) << out.status().ToString();
      results.push_back(*out);
    }
    ExpectSameOutputs(results[0], results[1], 1e-5f, PrecisionName(p));
  }
}

// The CPU profile's register blocking follows the SIMD width it is given: for AVX2 (8 lanes, 16
// registers) no convolution or matrix product keeps more than 12 registers of accumulators
// (more spill; a convolution's row strided along W may take all 16), for AVX-512 (16 and 32) the
// blocks are larger, and both give the same values (each output's sum runs over the same inputs in
// the same order; only how many outputs a work-item holds changes).
TEST(Profiles, SimdWidthSetsTheBlockingNotTheResults) {
  Device &dev = TestDevice();
  ASSERT_TRUE(dev.device);
  Graph g;
  ASSERT_NO_FATAL_FAILURE(LoadOptimized("driving_vision_small.onnx", &g));
  std::vector<Tensor> feeds;
  ASSERT_NO_FATAL_FAILURE(RandomImages(g, 22, &feeds));
  auto define = [](const std::string &src, const std::string &name) {
    size_t at = src.find("#define " + name + " ");
    return at == std::string::npos ? -1 : std::stoi(src.substr(at + 9 + name.size()));
  };
  std::vector<std::vector<Tensor>> results;
  std::vector<int> widest;
  for (auto [lanes, regs] : {std::pair{16, 32}, std::pair{8, 16}}) {
    auto opt = OptionsForProfile("cpu", Precision::kFp32);
    ASSERT_TRUE(opt.ok());
    opt->simd_lanes = lanes;
    opt->simd_registers = regs;
    auto m = GenerateCode(g, *opt);
    ASSERT_TRUE(m.ok()) << m.status().ToString();
    int most = 0, convs = 0, products = 0;
    for (const std::string &src : m->sources) {
      if (src.find("matmul_vec(") != std::string::npos) {
        products++;
        const int v = define(src, "V"), rm = define(src, "RM"), nv = define(src, "NV");
        ASSERT_GT(v * rm * nv, 0) << src.substr(0, 400);
        EXPECT_LE(rm * nv * ((v + lanes - 1) / lanes), regs * 3 / 4)
            << lanes << " lanes: RM " << rm << ", NV " << nv << ", V " << v;
      }
      if (src.find("conv2d_vec(") == std::string::npos)
        continue;
      convs++;
      const int v = define(src, "V"), pv = define(src, "PV"), ocb = define(src, "OCB");
      ASSERT_GT(v * pv * ocb, 0) << src.substr(0, 400);
      const int accumulator_regs = ocb * pv * ((v + lanes - 1) / lanes);
      // A strided row may take all of AVX2's 16 (its input vectors cost a deinterleave each).
      const bool strided = define(src, "FLAT") == 0 && define(src, "SW") > 1 && regs < 32;
      EXPECT_LE(accumulator_regs, strided ? regs : regs * 3 / 4)
          << lanes << " lanes: OCB " << ocb << ", PV " << pv;
      most = std::max(most, ocb * pv);
    }
    EXPECT_GT(convs, 0);
    EXPECT_GT(products, 0);
    widest.push_back(most);
    auto e = Executor::Create(dev.device, *m);
    ASSERT_TRUE(e.ok()) << e.status().ToString();
    auto out = (*e)->RunHost(dev.queue, feeds);
    ASSERT_TRUE(out.ok()) << out.status().ToString();
    results.push_back(*out);
  }
  EXPECT_GT(widest[0], widest[1]) << "AVX-512 blocks hold more channels than AVX2's";
  ExpectSameOutputs(results[0], results[1], 0.0f, "AVX-512 against AVX2 blocking");
}

// Kernels that differ only in their sizes take them as arguments and share one program (a cold
// start builds each program once): two 1x1 convolutions, two depthwise 7x7 convolutions and two
// products with a constant B, each pair with the same blocking and epilogue but other sizes,
// make three programs for six kernels, and every output still matches the reference.
// `b`'s graph, shape-inferred and compiled for the cpu profile at fp32 as for AVX-512 (16 float
// lanes, 32 vector registers), whatever the device here has.
StatusOr<CompiledModel> Avx512Code(Builder &b) {
  OP_RETURN_IF_ERROR(InferShapes(b.g));
  OP_ASSIGN_OR_RETURN(CodegenOptions opt, OptionsForProfile("cpu", Precision::kFp32));
  opt.simd_lanes = 16;
  opt.simd_registers = 32;
  return GenerateCode(b.g, opt);
}

TEST(Profiles, KernelsThatDifferOnlyInSizeShareAProgram) {
  Device &dev = TestDevice();
  ASSERT_TRUE(dev.device);
  Builder b;
  using Ints = std::vector<int64_t>;
  auto window = [](Ints kernel, Ints pads, int64_t group) {
    Attributes at;
    at.Set("kernel_shape", kernel);
    at.Set("pads", pads);
    at.Set("group", group);
    return at;
  };
  for (auto [c, hw] : {std::pair<int64_t, int64_t>{24, 16}, {48, 32}}) {
    TensorId x = b.Input("x" + std::to_string(c), {1, c, hw, hw});
    TensorId pw = b.Add(OpKind::kConv, {x, b.Weights({c, c, 1, 1}), b.Weights({c})},
                        window({1, 1}, {0, 0, 0, 0}, 1));
    b.Output(b.Add(OpKind::kConv, {pw, b.Weights({c, 1, 7, 7}), b.Weights({c})},
                   window({7, 7}, {3, 3, 3, 3}, c)));
  }
  for (auto [k, n] : {std::pair<int64_t, int64_t>{21, 37}, {45, 133}}) {
    TensorId a = b.Input("a" + std::to_string(k), {9, k});
    b.Output(b.Add(OpKind::kMatMul, {a, b.Weights({k, n})}));
  }
  auto m = Avx512Code(b);
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  std::map<std::string, std::set<uint32_t>> sources;
  std::map<std::string, int> kernels;
  for (const KernelDesc &k : m->kernels) {
    sources[k.entry].insert(k.source);
    kernels[k.entry]++;
  }
  for (const char *entry : {"conv2d_vec", "conv2d_dw", "matmul_vec"}) {
    EXPECT_EQ(kernels[entry], 2) << entry;
    EXPECT_EQ(sources[entry].size(), 1u) << entry << ": sizes should be arguments";
  }
  ExpectMatchesReference(b, Precision::kFp32, 1e-4f, "size-shared kernels");
}

// The products of a float16 model at fp32 precision: their weight panels stay half in memory
// (widened exactly as they load), a product of 4 MFLOP or more splits its grid into at least 64
// work-groups, and 25 rows take AVX-512 blocks of 5 rather than 4 blocks of 8.
TEST(Profiles, ProductsKeepHalfWeightsAndChooseTheirBlocksAndGroups) {
  Builder b;
  auto halves = [&](int64_t n) {
    Bytes bytes(static_cast<size_t>(n) * 2);
    for (int64_t i = 0; i < n; i++) {
      const uint16_t h = FloatToHalf(b.rng.Uniform(-1.f, 1.f));
      bytes[2 * i] = static_cast<uint8_t>(h & 0xff);
      bytes[2 * i + 1] = static_cast<uint8_t>(h >> 8);
    }
    return bytes;
  };
  auto product = [&](const std::string &name, int64_t m, int64_t k, int64_t n) {
    TensorId a = b.InputTyped(name, DType::kFloat16, Shape({m, k}), halves(m * k));
    TensorId w = b.Const(MakeConstant(DType::kFloat16, Shape({k, n}), halves(k * n)));
    b.Output(b.Add(OpKind::kMatMul, {a, w}));
  };
  product("rows25", 25, 96, 200);  // 0.96 MFLOP: the driver's work-groups
  product("big", 32, 384, 1152);   // 28 MFLOP
  auto m = Avx512Code(b);
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  int products = 0;
  for (const KernelDesc &k : m->kernels) {
    if (k.entry != "matmul_vec")
      continue;
    products++;
    const std::string &src = m->sources[k.source];
    EXPECT_NE(src.find("#define TB f16"), std::string::npos) << k.label << ": float32 weights";
    if (k.flops < 4'000'000) {
      EXPECT_TRUE(k.local.empty()) << k.label;
      EXPECT_NE(src.find("#define RM 5"), std::string::npos) << k.label << ": 25 rows";
      EXPECT_EQ(k.global[0], 5u) << k.label;
      continue;
    }
    ASSERT_EQ(k.local.size(), k.global.size()) << k.label;
    uint64_t groups = 1;
    for (size_t d = 0; d < k.global.size(); d++) {
      ASSERT_GT(k.local[d], 0u);
      EXPECT_EQ(k.global[d] % k.local[d], 0u) << k.label << " dimension " << d;
      groups *= k.global[d] / k.local[d];
    }
    EXPECT_GE(groups, 64u) << k.label;
  }
  EXPECT_EQ(products, 2);
  // Float32 panels would take 4 bytes per weight.
  EXPECT_LT(m->weights.size(), 3u * (96 * 200 + 384 * 1152));
  ExpectMatchesReference(b, Precision::kFp32, 2e-3f, "half weight panels");
}

}  // namespace

namespace {

// The on-disk cache of compiled models: a second load is a hit, a corrupted entry is compiled
// again and replaced, and an .opm file is read as it is.
TEST(Compiler, CachesCompiledModelsAndRecoversFromACorruptEntry) {
  Device &dev = TestDevice();
  ASSERT_TRUE(dev.device);
  std::string dir = ::testing::TempDir() + "/nn-device-cache-" + std::to_string(getpid());
  CompileOptions o;
  o.cache_dir = dir;
  std::string model = SourceRoot() + "/models/driving_policy_small.onnx";
  LoadInfo first, second, third;
  auto a = LoadOrCompile(model, *dev.device, o, &first);
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  EXPECT_TRUE(first.compiled);
  EXPECT_FALSE(first.from_cache);
  auto b = LoadOrCompile(model, *dev.device, o, &second);
  ASSERT_TRUE(b.ok());
  EXPECT_TRUE(second.from_cache);
  EXPECT_EQ(second.cache_path, first.cache_path);
  EXPECT_EQ(*SerializeModel(*a), *SerializeModel(*b));
  {
    std::ofstream f(first.cache_path, std::ios::binary | std::ios::trunc);
    f << "OPM1 garbage";
  }
  auto c = LoadOrCompile(model, *dev.device, o, &third);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_TRUE(third.compiled);
  EXPECT_TRUE(ReadModelFile(first.cache_path).ok());
  // Another precision is another entry.
  o.precision = Precision::kFp16;
  LoadInfo fourth;
  ASSERT_TRUE(LoadOrCompile(model, *dev.device, o, &fourth).ok());
  EXPECT_NE(fourth.cache_path, first.cache_path);
  // A compiled model asked for another precision than it records is an error naming both;
  // auto takes the recorded one.
  LoadInfo opm;
  auto wrong = LoadOrCompile(first.cache_path, *dev.device, o, &opm);
  ASSERT_FALSE(wrong.ok());
  EXPECT_NE(wrong.status().message().find("compiled for precision fp32, not the fp16 asked"),
            std::string::npos)
      << wrong.status().ToString();
  o.auto_precision = true;
  auto d = LoadOrCompile(first.cache_path, *dev.device, o, &opm);
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  EXPECT_FALSE(opm.compiled);
  EXPECT_EQ(d->precision, "fp32");
}

}  // namespace
