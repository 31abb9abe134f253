// The OpenCL layer on the machine's devices (PoCL in CI): choice, capabilities, queue, cache.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

#include "cl/device.h"
#include "cl/program_cache.h"
#include "cl/queue.h"
#include "cl/thread_pool.h"
#include "cl_kernels.h"

using namespace op;
using namespace op::cl;

TEST(Device, AutoChoosesAGpuOrSaysItFellBack) {
  auto sel = SelectDevice("auto");
  ASSERT_TRUE(sel.ok()) << sel.status().ToString();
  if (sel->info.caps.is_gpu)
    EXPECT_TRUE(sel->fallback.empty());
  else
    EXPECT_NE(sel->fallback.find("no OpenCL GPU"), std::string::npos) << sel->fallback;
}

TEST(Device, IndicesAndSubstringsSelectTheSameDevice) {
  auto all = ListDevices();
  ASSERT_TRUE(all.ok());
  const DeviceInfo &first = all->front();
  auto by_index = SelectDevice("0:0");
  ASSERT_TRUE(by_index.ok()) << by_index.status().ToString();
  EXPECT_EQ(by_index->info.device, first.device);
  std::string name = first.caps.device_name.substr(0, 6);
  auto by_name = SelectDevice(name);
  ASSERT_TRUE(by_name.ok()) << by_name.status().ToString();
  EXPECT_EQ(by_name->info.device, first.device);
}

TEST(Device, UnknownStringsAreNotFoundAndListTheDevices) {
  for (const char *spec : {"no-such-vendor-xyz", "7:9"}) {
    auto sel = SelectDevice(spec);
    ASSERT_FALSE(sel.ok()) << spec;
    EXPECT_EQ(sel.status().code(), StatusCode::kNotFound);
    EXPECT_NE(sel.status().message().find(spec), std::string::npos);
    EXPECT_NE(sel.status().message().find("0:0"), std::string::npos);
  }
}

TEST(Device, CapabilityRecordIsFilled) {
  auto dev = Device::Open("auto");
  ASSERT_TRUE(dev.ok()) << dev.status().ToString();
  const Capabilities &c = (*dev)->caps();
  EXPECT_FALSE(c.device_name.empty());
  EXPECT_GT(c.max_work_group_size, 0u);
  EXPECT_GT(c.compute_units, 0u);
  EXPECT_GE(c.base_address_align_bits, 8u * 4);  // at least the largest scalar, in bits
  EXPECT_EQ(c.base_address_align_bits % 8, 0u);
  EXPECT_EQ(c.fp16, c.HasExtension("cl_khr_fp16"));
  EXPECT_FALSE(c.HasExtension("cl_khr"));  // whole names only
  if (c.is_cpu) {
    EXPECT_EQ(c.profile, Profile::kCpu);
    EXPECT_TRUE(c.unified_memory);
    EXPECT_TRUE((*dev)->buffer_policy().zero_copy_maps);
  }
  EXPECT_NE(c.Describe().find(c.device_name), std::string::npos);
}

TEST(EventList, SkipsNullAndDuplicates) {
  EventList l;
  EXPECT_TRUE(l.empty());
  EXPECT_EQ(l.data(), nullptr);
  cl_event fake = reinterpret_cast<cl_event>(0x10);
  l.Add(nullptr);
  l.Add(fake);
  l.Add(fake);
  EXPECT_EQ(l.size(), 1u);
}

class ClTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto dev = Device::Open("auto");
    ASSERT_TRUE(dev.ok()) << dev.status().ToString();
    device = *dev;
    auto q = Queue::Create(*device);
    ASSERT_TRUE(q.ok());
    queue = std::move(q).value();
  }
  std::shared_ptr<Device> device;
  Queue queue;
};

TEST_F(ClTest, EmbeddedKernelRunsAndEventsChain) {
  std::string_view src = kernels::Find("selftest");
  ASSERT_FALSE(src.empty());
  auto program = device->programs().Build(src, "-cl-std=CL1.2", "selftest");
  ASSERT_TRUE(program.ok()) << program.status().ToString();
  auto kernel = CreateKernel(program->get(), "op_saxpy");
  ASSERT_TRUE(kernel.ok()) << kernel.status().ToString();

  const int n = 1000;
  std::vector<float> x(n), y(n), out(n);
  for (int i = 0; i < n; i++)
    x[i] = float(i), y[i] = float(2 * i + 1);
  auto bx = device->CreateBuffer(n * 4), by = device->CreateBuffer(n * 4);
  ASSERT_TRUE(bx.ok() && by.ok());
  auto wx = queue.Write(bx->get(), 0, n * 4, x.data());
  auto wy = queue.Write(by->get(), 0, n * 4, y.data());
  ASSERT_TRUE(wx.ok() && wy.ok());
  cl_mem mx = bx->get(), my = by->get();
  ASSERT_TRUE(SetArgs(kernel->get(), mx, my, 3.0f, n).ok());
  size_t global = 1024;
  auto run = queue.Launch(kernel->get(), 1, &global, nullptr, {wx->get(), wy->get()});
  ASSERT_TRUE(run.ok()) << run.status().ToString();
  auto rd = queue.Read(my, 0, n * 4, out.data(), {run->get()});
  ASSERT_TRUE(rd.ok());
  ASSERT_TRUE(WaitForEvent(rd->get()).ok());
  for (int i = 0; i < n; i++)
    ASSERT_EQ(out[i], 3.0f * i + 2 * i + 1) << i;
}

TEST_F(ClTest, RectCopiesKeepPitches) {
  // A 5-row, 7-byte-wide region between pitches 16 (device) and 9 (host), at an offset.
  std::vector<uint8_t> host(9 * 5), back(9 * 5, 0);
  for (size_t i = 0; i < host.size(); i++)
    host[i] = uint8_t(i * 37 + 1);
  auto buf = device->CreateBuffer(16 * 8);
  ASSERT_TRUE(buf.ok());
  auto fill = queue.Fill(buf->get(), 0, 16 * 8, 0xAB);
  auto w = queue.WriteRect(buf->get(), 16 * 2 + 3, 16, host.data(), 9, 7, 5, {fill->get()});
  ASSERT_TRUE(w.ok()) << w.status().ToString();
  std::vector<uint8_t> whole(16 * 8);
  auto r = queue.Read(buf->get(), 0, whole.size(), whole.data(), {w->get()});
  auto r2 = queue.ReadRect(buf->get(), 16 * 2 + 3, 16, back.data(), 9, 7, 5, {w->get()});
  ASSERT_TRUE(r.ok() && r2.ok());
  ASSERT_TRUE(queue.Finish().ok());
  for (size_t row = 0; row < 8; row++)
    for (size_t col = 0; col < 16; col++) {
      bool inside = row >= 2 && row < 7 && col >= 3 && col < 10;
      uint8_t want = inside ? host[(row - 2) * 9 + (col - 3)] : 0xAB;
      ASSERT_EQ(whole[row * 16 + col], want) << row << "," << col;
    }
  for (size_t row = 0; row < 5; row++)
    for (size_t col = 0; col < 7; col++)
      ASSERT_EQ(back[row * 9 + col], host[row * 9 + col]);
}

TEST_F(ClTest, ProgramCacheBuildsOnceAndReusesDiskBinaries) {
  namespace fs = std::filesystem;
  fs::path dir = fs::temp_directory_path() / ("op-cl-cache-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  std::string src = std::string(kernels::Find("selftest")) + "\n// variant for the cache test\n";
  {
    ProgramCache cache(device->context(), device->id(), device->caps(), dir.string());
    ASSERT_TRUE(cache.Build(src, "", "t").ok());
    ASSERT_TRUE(cache.Build(src, "", "t").ok());
    EXPECT_EQ(cache.stats().builds, 1);
    EXPECT_EQ(cache.stats().memory_hits, 1);
    // Other options are another program.
    ASSERT_TRUE(cache.Build(src, "-cl-fast-relaxed-math", "t").ok());
    EXPECT_EQ(cache.stats().builds, 2);
  }
  size_t files = 0;
  for (auto &e : fs::directory_iterator(dir))
    files += e.path().extension() == ".bin";
  EXPECT_EQ(files, 2u);
  {
    ProgramCache cache(device->context(), device->id(), device->caps(), dir.string());
    auto p = cache.Build(src, "", "t");
    ASSERT_TRUE(p.ok());
    EXPECT_EQ(cache.stats().disk_hits, 1);
    EXPECT_EQ(cache.stats().builds, 0);
    EXPECT_TRUE(CreateKernel(p->get(), "op_saxpy").ok());
  }
  // A damaged binary is ignored and rebuilt, never trusted.
  for (auto &e : fs::directory_iterator(dir))
    fs::resize_file(e.path(), 20);
  {
    ProgramCache cache(device->context(), device->id(), device->caps(), dir.string());
    ASSERT_TRUE(cache.Build(src, "", "t").ok());
    EXPECT_EQ(cache.stats().builds, 1);
  }
  fs::remove_all(dir);
}

TEST(ThreadPool, ParallelForRunsEveryIndexOnceOnSeveralThreads) {
  for (int workers : {0, 1, 3}) {
    ThreadPool pool(workers);
    std::vector<std::atomic<int>> hits(200);
    std::mutex lock;
    std::vector<std::thread::id> seen;
    pool.ParallelFor(hits.size(), [&](size_t i) {
      hits[i]++;
      // Long enough that idle workers pick up the next indices.
      std::this_thread::sleep_for(std::chrono::microseconds(200));
      std::lock_guard<std::mutex> g(lock);
      if (std::find(seen.begin(), seen.end(), std::this_thread::get_id()) == seen.end())
        seen.push_back(std::this_thread::get_id());
    });
    for (size_t i = 0; i < hits.size(); i++)
      ASSERT_EQ(hits[i].load(), 1) << "index " << i << ", " << workers << " workers";
    if (workers == 0)
      EXPECT_EQ(seen, std::vector<std::thread::id>{std::this_thread::get_id()});
    else
      EXPECT_GT(seen.size(), 1u) << workers << " workers";
    pool.ParallelFor(0, [](size_t) { FAIL() << "no index to run"; });
  }
}

TEST_F(ClTest, BuildAllBuildsDistinctProgramsOnceAndReportsProgress) {
  ProgramCache cache(device->context(), device->id(), device->caps(), "none");
  std::string base(kernels::Find("selftest"));
  std::vector<std::string> src;
  for (int i = 0; i < 4; i++)
    src.push_back(base + "\n// BuildAll variant " + std::to_string(i) + "\n");
  // Six requests, four distinct programs: 0 and 2 repeat with the same options.
  std::vector<ProgramRequest> req = {{src[0], "", "a"}, {src[1], "", "b"}, {src[0], "", "a2"},
                                     {src[2], "", "c"}, {src[3], "", "d"}, {src[2], "", "c2"}};
  std::vector<std::pair<size_t, size_t>> calls;
  auto progs = cache.BuildAll(req, [&](size_t done, size_t total) {
    calls.push_back({done, total});  // one call at a time, by contract
  });
  ASSERT_TRUE(progs.ok()) << progs.status().ToString();
  ASSERT_EQ(progs->size(), req.size());
  EXPECT_EQ(cache.stats().builds, 4);
  EXPECT_EQ((*progs)[0].get(), (*progs)[2].get());
  EXPECT_EQ((*progs)[3].get(), (*progs)[5].get());
  EXPECT_NE((*progs)[0].get(), (*progs)[1].get());
  for (const auto &p : *progs)
    EXPECT_TRUE(CreateKernel(p.get(), "op_saxpy").ok());
  std::vector<std::pair<size_t, size_t>> want = {{1, 4}, {2, 4}, {3, 4}, {4, 4}};
  EXPECT_EQ(calls, want);

  // A failing request: the error is the first failing one's, by request order.
  std::vector<ProgramRequest> bad = {{src[0], "", "fine"},
                                     {"__kernel void broken( { }", "", "first-broken"},
                                     {"__kernel void alsobroken( { }", "", "second-broken"}};
  auto failed = cache.BuildAll(bad);
  ASSERT_FALSE(failed.ok());
  EXPECT_NE(failed.status().message().find("first-broken"), std::string::npos)
      << failed.status().message();
}

TEST(ProgramRequests, RoundTripAndMalformedFiles) {
  std::vector<ProgramRequest> req = {{"__kernel void a() {}\n", "-DX=1", "first"},
                                     {std::string_view("b\0c", 3), "", ""}};
  const std::string link_options = "-cl-kernel-arg-info";
  for (const std::string *link : {static_cast<const std::string *>(nullptr), &link_options}) {
    const std::string bytes = SerializeProgramRequests(req, link);
    auto back = ParseProgramRequests(bytes);
    ASSERT_TRUE(back.ok()) << back.status().ToString();
    EXPECT_EQ(back->link, link != nullptr);
    EXPECT_EQ(back->link_options, link ? *link : "");
    ASSERT_EQ(back->requests.size(), 2u);
    EXPECT_EQ(back->requests[0].source, req[0].source);
    EXPECT_EQ(back->requests[0].options, "-DX=1");
    EXPECT_EQ(back->requests[0].label, "first");
    EXPECT_EQ(back->requests[1].source, std::string("b\0c", 3));
    for (size_t n = 0; n < bytes.size(); n++) {  // every truncation is an error or fewer requests
      auto cut = ParseProgramRequests(std::string_view(bytes).substr(0, n));
      if (cut.ok()) {
        EXPECT_LT(cut->requests.size(), 2u) << n;
      }
    }
  }
  EXPECT_FALSE(ParseProgramRequests("OPBR2\nB\n99999999999999999999 1 1\nx").ok());
  EXPECT_FALSE(ParseProgramRequests("OPBR2\nL 99\nshort").ok());
  EXPECT_FALSE(ParseProgramRequests("OPBR2\nQ\n").ok());
  EXPECT_FALSE(ParseProgramRequests("garbage").ok());
}

namespace {

// A template with two kernels and a helper, specialised by SCALE as a model's kernels are by
// their shapes: "scale" multiplies by SCALE, "offset" adds it.
std::string LinkSource(int scale, const std::string &extra = "") {
  return "#define SCALE " + std::to_string(scale) + ".0f\n" + extra +
         "static inline float times(float v) { return v * SCALE; }\n"
         "// a comment naming __kernel void not_a_kernel\n"
         "__kernel void scale(__global float *y) { y[get_global_id(0)] = "
         "times(y[get_global_id(0)]); }\n"
         "kernel __attribute__((reqd_work_group_size(1, 1, 1))) void offset(__global float *y) {\n"
         "  y[get_global_id(0)] += SCALE;\n}\n";
}

// Runs `k` on {1, 2, 3, 4} and returns the result.
std::vector<float> RunOnFour(Device &device, Queue &queue, cl_kernel k) {
  std::vector<float> y = {1, 2, 3, 4};
  auto buf = device.CreateBuffer(16);
  EXPECT_TRUE(buf.ok());
  auto w = queue.Write(buf->get(), 0, 16, y.data());
  cl_mem m = buf->get();
  EXPECT_TRUE(SetArgs(k, m).ok());
  size_t global = 4, local = 1;
  auto run = queue.Launch(k, 1, &global, &local, {w->get()});
  EXPECT_TRUE(run.ok()) << run.status().ToString();
  auto rd = queue.Read(m, 0, 16, y.data(), {run->get()});
  EXPECT_TRUE(rd.ok() && WaitForEvent(rd->get()).ok());
  return y;
}

}  // namespace

// BuildKernels: one template specialised three ways links (its kernels renamed per
// specialisation), into programs whose binaries a second cache loads without building;
// each kernel computes what its own specialisation says.
TEST_F(ClTest, BuildKernelsLinksSpecialisationsAndReloadsThem) {
  namespace fs = std::filesystem;
  fs::path dir = fs::temp_directory_path() / ("op-cl-link-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  setenv("GST_OP_BUILD_HELPER", "0", 1);
  const std::string s2 = LinkSource(2), s3 = LinkSource(3), s5 = LinkSource(5);
  // Five kernels, three distinct programs; the same kernel name in each.
  std::vector<KernelRequest> req = {{s2, "-cl-kernel-arg-info", "two", "scale"},
                                    {s3, "-cl-kernel-arg-info", "three", "offset"},
                                    {s2, "-cl-kernel-arg-info", "two", "offset"},
                                    {s5, "-cl-kernel-arg-info", "five", "scale"},
                                    {s3, "-cl-kernel-arg-info", "three", "scale"}};
  const std::vector<std::vector<float>> want = {
      {2, 4, 6, 8}, {4, 5, 6, 7}, {3, 4, 5, 6}, {5, 10, 15, 20}, {3, 6, 9, 12}};
  for (int pass = 0; pass < 2; pass++) {
    ProgramCache cache(device->context(), device->id(), device->caps(), dir.string());
    std::vector<std::pair<size_t, size_t>> calls;
    auto kernels = cache.BuildKernels(req, "-cl-kernel-arg-info", [&](size_t done, size_t total) {
      calls.push_back({done, total});
    });
    ASSERT_TRUE(kernels.ok()) << kernels.status().ToString();
    ASSERT_EQ(kernels->size(), req.size());
    std::set<cl_program> programs;
    for (size_t i = 0; i < req.size(); i++) {
      cl_kernel k = (*kernels)[i].get();
      cl_program p = nullptr;
      ASSERT_EQ(clGetKernelInfo(k, CL_KERNEL_PROGRAM, sizeof(p), &p, nullptr), CL_SUCCESS);
      programs.insert(p);
      char type[64] = {0};  // the link keeps the argument info the executor checks
      ASSERT_EQ(clGetKernelArgInfo(k, 0, CL_KERNEL_ARG_TYPE_NAME, sizeof(type), type, nullptr),
                CL_SUCCESS);
      EXPECT_STREQ(type, "float*");
      EXPECT_EQ(RunOnFour(*device, queue, k), want[i]) << "pass " << pass << ", request " << i;
    }
    EXPECT_EQ(ProgramCache::LinkGroups(3), 1u);
    EXPECT_EQ(programs.size(), 1u);  // three objects, one link: fewer than six per program
    std::vector<std::pair<size_t, size_t>> one_by_one;  // 3 objects + 1 link, loaded or built
    for (size_t d = 1; d <= 4; d++)
      one_by_one.push_back({d, 4});
    EXPECT_EQ(calls, one_by_one);
    const ProgramCache::Stats st = cache.stats();
    EXPECT_EQ(st.link_fallbacks, 0);
    if (pass == 0) {
      EXPECT_EQ(st.builds, 1);  // the three sources compiled as one
      EXPECT_EQ(st.bundles, 1);
      EXPECT_EQ(st.links, 1);
    } else {
      EXPECT_EQ(st.builds, 0);
      EXPECT_EQ(st.links, 0);
      EXPECT_EQ(st.disk_hits, 1);  // the linked program, not the objects
    }
  }
  unsetenv("GST_OP_BUILD_HELPER");
  fs::remove_all(dir);
}

// A linked program's sources compile as one (24 sources in five programs, five or four per
// program): each keeps its own macros, static functions and constants, and what an include
// guard chose, as if compiled alone; a second cache loads the linked programs without building.
TEST_F(ClTest, BuildKernelsCompilesAProgramsSourcesTogether) {
  namespace fs = std::filesystem;
  fs::path dir = fs::temp_directory_path() / ("op-cl-bundle-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  setenv("GST_OP_BUILD_HELPER", "0", 1);
  // FLAG picks, behind an include guard, which bias() the source gets; the table and bias are
  // static, as a template's helpers are, and bias() is defined by a macro.
  auto source = [](int k) {
    return LinkSource(k,
                      "#define FLAG " + std::to_string(k % 2) +
                          "\n"
                          "#define DEFINE_BIAS(v) static inline float bias(void) { return v; }\n"
                          "#ifndef COMMON_GUARD\n#define COMMON_GUARD\n"
                          "#if FLAG\nDEFINE_BIAS(100.0f)\n#else\nDEFINE_BIAS(0.0f)\n#endif\n"
                          "#endif\n"
                          "static __constant float table[2] = {SCALE, 1.0f};\n"
                          "__kernel void biased(__global float *y) {\n"
                          "  y[get_global_id(0)] = y[get_global_id(0)] * table[0] + bias();\n}\n");
  };
  std::vector<std::string> src;
  std::vector<KernelRequest> req;
  for (int k = 2; k < 26; k++)
    src.push_back(source(k));
  for (int k = 2; k < 26; k++) {
    req.push_back({src[k - 2], "", "biased " + std::to_string(k), "biased"});
    req.push_back({src[k - 2], "", "scale " + std::to_string(k), "scale"});
  }
  ASSERT_EQ(ProgramCache::LinkGroups(src.size()), 5u);
  for (int pass = 0; pass < 2; pass++) {
    ProgramCache cache(device->context(), device->id(), device->caps(), dir.string());
    auto kernels = cache.BuildKernels(req, "");
    ASSERT_TRUE(kernels.ok()) << kernels.status().ToString();
    for (int k = 2; k < 26; k++) {
      const float v = float(k), b = k % 2 ? 100.f : 0.f;
      EXPECT_EQ(RunOnFour(*device, queue, (*kernels)[2 * (k - 2)].get()),
                std::vector<float>({v + b, 2 * v + b, 3 * v + b, 4 * v + b}))
          << "biased, source " << k << ", pass " << pass;
      EXPECT_EQ(RunOnFour(*device, queue, (*kernels)[2 * (k - 2) + 1].get()),
                std::vector<float>({v, 2 * v, 3 * v, 4 * v}))
          << "scale, source " << k << ", pass " << pass;
    }
    const ProgramCache::Stats st = cache.stats();
    EXPECT_EQ(st.bundle_fallbacks, 0);
    EXPECT_EQ(st.link_fallbacks, 0);
    if (pass == 0) {
      EXPECT_EQ(st.bundles, 5);
      EXPECT_EQ(st.builds, 5);  // one compile per linked program
      EXPECT_EQ(st.links, 5);
    } else {
      EXPECT_EQ(st.builds, 0);
      EXPECT_EQ(st.disk_hits, 5);
    }
  }
  unsetenv("GST_OP_BUILD_HELPER");
  fs::remove_all(dir);
}

// Where the objects cannot link (two of them define one global function), and where
// GST_OP_LINK=0 asks, the kernels come from one program per distinct request and still compute
// their own specialisation; a source that does not compile is an error naming it.
TEST_F(ClTest, BuildKernelsFallsBackToOneProgramPerRequest) {
  const std::string clash = "float shared_global(float v) { return v; }\n";
  // Twelve programs, dealt out to three links: the third and sixth, linked together (the last
  // link), clash.
  std::vector<std::string> src;
  for (int i = 0; i < 12; i++)
    src.push_back(LinkSource(i + 2, i == 2 || i == 5 ? clash : ""));
  ASSERT_EQ(ProgramCache::LinkGroups(src.size()), 3u);
  std::vector<KernelRequest> req;
  for (const std::string &text : src)
    req.push_back({text, "", "k", "scale"});
  for (bool env : {false, true}) {
    if (env)
      setenv("GST_OP_LINK", "0", 1);
    ProgramCache cache(device->context(), device->id(), device->caps(), "none");
    auto kernels = cache.BuildKernels(req, "");
    unsetenv("GST_OP_LINK");
    ASSERT_TRUE(kernels.ok()) << kernels.status().ToString();
    for (int i = 0; i < 12; i++) {
      const float v = float(i + 2);
      EXPECT_EQ(RunOnFour(*device, queue, (*kernels)[i].get()),
                std::vector<float>({v, 2 * v, 3 * v, 4 * v}))
          << i;
    }
    EXPECT_EQ(cache.stats().links, env ? 0 : 2);  // the first two linked, the third failed
    EXPECT_EQ(cache.stats().link_fallbacks, env ? 0 : 1);
    // The clashing pair does not compile as one source either: its parts compiled one by one.
    EXPECT_EQ(cache.stats().bundle_fallbacks, env ? 0 : 1);
  }
  // A source that does not compile is named, alone or compiled with others (eight sources:
  // the broken one shares its linked program with another).
  for (size_t count : {2, 8}) {
    ProgramCache cache(device->context(), device->id(), device->caps(), "none");
    std::vector<std::string> fine;  // (requests hold views)
    for (size_t i = 0; i + 1 < count; i++)
      fine.push_back(LinkSource(int(i) + 2));
    std::vector<KernelRequest> bad;
    for (const std::string &text : fine)
      bad.push_back({text, "", "fine", "scale"});
    bad.push_back({"__kernel void broken( { }", "", "the-broken-one", "broken"});
    auto failed = cache.BuildKernels(bad, "");
    ASSERT_FALSE(failed.ok());
    EXPECT_NE(failed.status().message().find("the-broken-one"), std::string::npos)
        << failed.status().message();
  }
}

// The helper process (op-build-programs) stores binaries this process then loads without
// building; and BuildAll, on PoCL with a disk cache, starts it and leaves nothing behind.
TEST_F(ClTest, BuildHelperStoresBinariesThisProcessLoads) {
  if (device->caps().platform_name.find("Portable Computing Language") == std::string::npos)
    GTEST_SKIP() << "the build helper serves PoCL only";
  namespace fs = std::filesystem;
  fs::path dir = fs::temp_directory_path() / ("op-cl-helper-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  std::string base(kernels::Find("selftest"));
  std::vector<std::string> src;
  for (int i = 0; i < 6; i++)
    src.push_back(base + "\n// helper variant " + std::to_string(i) + "\n");
  const std::string spec = std::to_string(device->info().platform_index) + ":" +
                           std::to_string(device->info().device_index);
  {
    std::vector<ProgramRequest> two = {{src[0], "", "h0"}, {src[1], "", "h1"}};
    const fs::path req = dir / "req";
    {
      std::ofstream f(req, std::ios::binary);
      f << SerializeProgramRequests(two);
    }
    const std::string cmd = std::string(OP_BUILD_HELPER_PATH) + " " + spec + " " + dir.string() +
                            " " + req.string() + " 2>/dev/null";
    ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
    ProgramCache cache(device->context(), device->id(), device->caps(), dir.string());
    EXPECT_TRUE(cache.HasBinary(src[0], ""));
    EXPECT_TRUE(cache.HasBinary(src[1], ""));
    EXPECT_FALSE(cache.HasBinary(src[2], ""));
    auto progs = cache.BuildAll(two);
    ASSERT_TRUE(progs.ok()) << progs.status().ToString();
    EXPECT_EQ(cache.stats().disk_hits, 2);
    EXPECT_EQ(cache.stats().builds, 0);
    EXPECT_EQ(cache.stats().helpers, 0);  // nothing left to build: no helper
    for (const auto &p : *progs)
      EXPECT_TRUE(CreateKernel(p.get(), "op_saxpy").ok());
    fs::remove(req);
  }
  {
    setenv("GST_OP_BUILD_HELPER", OP_BUILD_HELPER_PATH, 1);
    ProgramCache cache(device->context(), device->id(), device->caps(), dir.string());
    cache.SetHelper(spec);
    std::vector<ProgramRequest> req;
    for (int i = 2; i < 6; i++)
      req.push_back({src[i], "", "p" + std::to_string(i)});
    auto progs = cache.BuildAll(req);
    unsetenv("GST_OP_BUILD_HELPER");
    ASSERT_TRUE(progs.ok()) << progs.status().ToString();
    EXPECT_EQ(cache.stats().helpers, 1);
    EXPECT_EQ(cache.stats().builds + cache.stats().disk_hits, 4);
    for (const auto &p : *progs)
      EXPECT_TRUE(CreateKernel(p.get(), "op_saxpy").ok());
    // Every binary stored, no request file or half-written store left (a program's lock file,
    // empty, stays).
    size_t bins = 0, others = 0;
    for (auto &e : fs::directory_iterator(dir))
      if (e.path().extension() != ".lock")
        (e.path().extension() == ".bin" ? bins : others)++;
    EXPECT_EQ(bins, 6u);
    EXPECT_EQ(others, 0u);
  }
  {
    // BuildKernels: the helper builds the last linked program (of three) while this process
    // builds the first; this process loads the helper's (or, were it gone, builds it) and the
    // kernels run.
    setenv("GST_OP_BUILD_HELPER", OP_BUILD_HELPER_PATH, 1);
    const fs::path link_dir = dir / "link";
    ProgramCache cache(device->context(), device->id(), device->caps(), link_dir.string());
    cache.SetHelper(spec);
    std::vector<std::string> sources;
    for (int scale = 2; scale < 14; scale++)
      sources.push_back(LinkSource(scale));
    std::vector<KernelRequest> req;
    for (const std::string &s : sources)
      req.push_back({s, "", "k", "scale"});
    auto kernels = cache.BuildKernels(req, "");
    unsetenv("GST_OP_BUILD_HELPER");
    ASSERT_TRUE(kernels.ok()) << kernels.status().ToString();
    EXPECT_EQ(cache.stats().helpers, 1);
    EXPECT_EQ(cache.stats().links + cache.stats().disk_hits, 3);  // three linked programs
    for (int i = 0; i < 12; i++) {
      const float s = float(i + 2);
      EXPECT_EQ(RunOnFour(*device, queue, (*kernels)[i].get()),
                std::vector<float>({s, 2 * s, 3 * s, 4 * s}));
    }
    size_t bins = 0, others = 0;
    for (auto &e : fs::directory_iterator(link_dir))
      if (e.path().extension() != ".lock")
        (e.path().extension() == ".bin" ? bins : others)++;
    EXPECT_GE(bins, 2u);  // the links (a bundle's objects are not stored)
    EXPECT_EQ(others, 0u);
  }
  {
    // Switched off: this process builds alone. (Unset, the choice follows the machine's load:
    // BuildHelperAutoWants below.)
    setenv("GST_OP_BUILD_HELPER", "0", 1);
    ProgramCache cache(device->context(), device->id(), device->caps(), (dir / "off").string());
    cache.SetHelper(spec);
    std::vector<ProgramRequest> req = {{src[0], "", "o0"}, {src[1], "", "o1"}};
    ASSERT_TRUE(cache.BuildAll(req).ok());
    unsetenv("GST_OP_BUILD_HELPER");
    EXPECT_EQ(cache.stats().helpers, 0);
    EXPECT_EQ(cache.stats().builds, 2);
  }
  fs::remove_all(dir);
}

// The automatic helper: only with a second core, and only while one core is idle (on the
// loaded development machine the helper made a cold start slower, on an idle one about twice
// as fast).
TEST(BuildHelper, AutoChoiceWantsAnIdleCore) {
  EXPECT_FALSE(BuildHelperAutoWants(0.0, 1));
  EXPECT_TRUE(BuildHelperAutoWants(0.0, 2));
  EXPECT_TRUE(BuildHelperAutoWants(1.0, 2));
  EXPECT_FALSE(BuildHelperAutoWants(1.2, 2));
  EXPECT_FALSE(BuildHelperAutoWants(11.0, 2));
  EXPECT_TRUE(BuildHelperAutoWants(6.5, 8));
  EXPECT_FALSE(BuildHelperAutoWants(7.5, 8));
}

TEST_F(ClTest, BuildErrorsNameTheProgramAndCarryTheLog) {
  auto p = device->programs().Build("__kernel void broken( { }", "", "broken-label");
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.status().code(), StatusCode::kDeviceError);
  EXPECT_NE(p.status().message().find("broken-label"), std::string::npos);
  EXPECT_NE(p.status().message().find("CL_BUILD_PROGRAM_FAILURE"), std::string::npos);
}
