// Nothing heavy per frame: 100 frames through opwarp (both cameras) → opvision → oppolicy →
// opmsgsink, after warm-up, with no allocation by our code, no OpenCL object created and no
// program built.
//
// Method. The test executable exports (export_dynamic) its own operator new and the OpenCL entry
// points that create objects or build programs, so the plugin's calls resolve to them first;
// each counts the call when it comes from a thread other than the test's own and forwards to the
// real one. operator new stands for every allocation of our C++ code (the elements, the
// runtime, the message filler); GStreamer core and GLib are C and allocate with g_malloc per
// buffer, event and message by design, which is not ours to count. OpenCL objects made per
// frame would be device allocations (clCreateBuffer/Image/SubBuffer), compilation
// (clCreateProgramWith*, clBuildProgram, clCompileProgram, clLinkProgram) or kernel creation
// (clCreateKernel). Events that enqueues return are the driver's and are not counted.
#include <dlfcn.h>
#include <execinfo.h>
#include <gst/gst.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "cl/cl.h"
#include "system_plugins.h"

namespace {

std::atomic<long> g_news{0}, g_cl_objects{0}, g_builds{0}, g_pool_allocs{0};
// Set while a thread is inside gst_buffer_pool_acquire_buffer: what a pool makes there is
// counted apart (see the test).
thread_local bool t_in_pool = false;
std::atomic<bool> g_counting{false}, g_measuring{false};
std::thread::id g_test_thread;

bool CountedAnywhere() {
  return g_counting.load(std::memory_order_relaxed) && std::this_thread::get_id() != g_test_thread;
}

// Counted as ours; an allocation inside a buffer pool's acquire goes to g_pool_allocs instead.
bool Counted() {
  if (!CountedAnywhere())
    return false;
  if (t_in_pool) {
    g_pool_allocs++;
    return false;
  }
  return true;
}

template <typename F>
F Real(const char *name) {
  static_assert(sizeof(F) == sizeof(void *));
  void *p = dlsym(RTLD_NEXT, name);
  if (!p) {
    // The executable itself calls no OpenCL function, so the loader may come only with the
    // plugin, outside the global scope that RTLD_NEXT searches.
    static void *lib = dlopen("libOpenCL.so.1", RTLD_NOW | RTLD_GLOBAL);
    p = lib ? dlsym(lib, name) : nullptr;
  }
  if (!p)
    std::abort();  // cannot forward: fail loudly rather than call null
  F f;
  std::memcpy(&f, &p, sizeof(p));
  return f;
}

// OP_PER_FRAME_TRACE=1: the stack of every allocation counted after warm-up goes to stderr.
thread_local bool t_tracing = false;
void Trace() {
  static const bool on = std::getenv("OP_PER_FRAME_TRACE") != nullptr;
  if (!on || t_tracing || !g_measuring)
    return;
  t_tracing = true;
  void *frames[24];
  int n = backtrace(frames, 24);
  backtrace_symbols_fd(frames, n, STDERR_FILENO);
  write(STDERR_FILENO, "----\n", 5);
  t_tracing = false;
}

}  // namespace

// ---- operator new: counted, then malloc -------------------------------------------------------

void CountAllocation() {
  if (Counted()) {
    g_news++;
    Trace();
  }
}

#include "../common/malloc_new.h"

// ---- OpenCL objects and builds --------------------------------------------------------------

extern "C" {

CL_API_ENTRY cl_mem CL_API_CALL clCreateBuffer(cl_context c, cl_mem_flags f, size_t n, void *h,
                                               cl_int *e) {
  static auto real = Real<decltype(&clCreateBuffer)>("clCreateBuffer");
  if (Counted()) {
    g_cl_objects++;
    Trace();
  }
  return real(c, f, n, h, e);
}

CL_API_ENTRY cl_mem CL_API_CALL clCreateSubBuffer(cl_mem m, cl_mem_flags f, cl_buffer_create_type t,
                                                  const void *info, cl_int *e) {
  static auto real = Real<decltype(&clCreateSubBuffer)>("clCreateSubBuffer");
  if (Counted())
    g_cl_objects++;
  return real(m, f, t, info, e);
}

CL_API_ENTRY cl_mem CL_API_CALL clCreateImage(cl_context c, cl_mem_flags f,
                                              const cl_image_format *fmt, const cl_image_desc *d,
                                              void *h, cl_int *e) {
  static auto real = Real<decltype(&clCreateImage)>("clCreateImage");
  if (Counted())
    g_cl_objects++;
  return real(c, f, fmt, d, h, e);
}

CL_API_ENTRY cl_kernel CL_API_CALL clCreateKernel(cl_program p, const char *name, cl_int *e) {
  static auto real = Real<decltype(&clCreateKernel)>("clCreateKernel");
  if (Counted())
    g_cl_objects++;
  return real(p, name, e);
}

CL_API_ENTRY cl_program CL_API_CALL clCreateProgramWithSource(cl_context c, cl_uint n,
                                                              const char **s, const size_t *l,
                                                              cl_int *e) {
  static auto real = Real<decltype(&clCreateProgramWithSource)>("clCreateProgramWithSource");
  if (Counted())
    g_builds++;
  return real(c, n, s, l, e);
}

CL_API_ENTRY cl_program CL_API_CALL clCreateProgramWithBinary(cl_context c, cl_uint n,
                                                              const cl_device_id *d,
                                                              const size_t *l,
                                                              const unsigned char **b, cl_int *st,
                                                              cl_int *e) {
  static auto real = Real<decltype(&clCreateProgramWithBinary)>("clCreateProgramWithBinary");
  if (Counted())
    g_builds++;
  return real(c, n, d, l, b, st, e);
}

CL_API_ENTRY cl_int CL_API_CALL clBuildProgram(cl_program p, cl_uint n, const cl_device_id *d,
                                               const char *o,
                                               void(CL_CALLBACK *cb)(cl_program, void *), void *u) {
  static auto real = Real<decltype(&clBuildProgram)>("clBuildProgram");
  if (Counted())
    g_builds++;
  return real(p, n, d, o, cb, u);
}

CL_API_ENTRY cl_int CL_API_CALL clCompileProgram(cl_program p, cl_uint n, const cl_device_id *d,
                                                 const char *o, cl_uint nh, const cl_program *h,
                                                 const char **hn,
                                                 void(CL_CALLBACK *cb)(cl_program, void *),
                                                 void *u) {
  static auto real = Real<decltype(&clCompileProgram)>("clCompileProgram");
  if (Counted())
    g_builds++;
  return real(p, n, d, o, nh, h, hn, cb, u);
}

CL_API_ENTRY cl_program CL_API_CALL clLinkProgram(cl_context c, cl_uint n, const cl_device_id *d,
                                                  const char *o, cl_uint np, const cl_program *ps,
                                                  void(CL_CALLBACK *cb)(cl_program, void *),
                                                  void *u, cl_int *e) {
  static auto real = Real<decltype(&clLinkProgram)>("clLinkProgram");
  if (Counted())
    g_builds++;
  return real(c, n, d, o, np, ps, cb, u, e);
}

GstFlowReturn gst_buffer_pool_acquire_buffer(GstBufferPool *pool, GstBuffer **buffer,
                                             GstBufferPoolAcquireParams *params) {
  static auto real =
      Real<decltype(&gst_buffer_pool_acquire_buffer)>("gst_buffer_pool_acquire_buffer");
  const bool outer = !t_in_pool;
  t_in_pool = true;
  GstFlowReturn ret = real(pool, buffer, params);
  if (outer)
    t_in_pool = false;
  return ret;
}

}  // extern "C"

namespace {

constexpr int kWidth = 1928, kHeight = 1208;  // the comma device's camera
constexpr GstClockTime kFrame = GST_SECOND / 20;

std::string Model(const char *name) {
  const char *root = std::getenv("OP_SOURCE_ROOT");
  return std::string(root ? root : ".") + "/models/" + name;
}

GstBuffer *Frame(const std::vector<uint8_t> &bytes, int k) {
  GstBuffer *b = gst_buffer_new_memdup(bytes.data(), bytes.size());
  GST_BUFFER_PTS(b) = k * kFrame;
  GST_BUFFER_DURATION(b) = kFrame;
  GST_BUFFER_OFFSET(b) = guint64(k);
  return b;
}

guint64 Messages(GstElement *sink) {
  guint64 n = 0;
  g_object_get(sink, "messages", &n, nullptr);
  return n;
}

std::string Errors(GstElement *pipeline) {
  GstBus *bus = gst_element_get_bus(pipeline);
  std::string text;
  while (GstMessage *m = gst_bus_pop_filtered(bus, GST_MESSAGE_ERROR)) {
    GError *err = nullptr;
    gst_message_parse_error(m, &err, nullptr);
    text += std::string(err->message) + "\n";
    g_error_free(err);
    gst_message_unref(m);
  }
  gst_object_unref(bus);
  return text;
}

TEST(PerFrame, HundredFramesAllocateNothingCreateNoObjectAndBuildNothing) {
  std::string why;
  ASSERT_TRUE(LoadSystemPlugins({{"app", "libgstapp.so"}}, &why)) << why;
  if (!gst_element_factory_find("opvision"))
    GTEST_SKIP() << "our plugin is not on the plugin path";
  g_test_thread = std::this_thread::get_id();

  const std::string caps = "video/x-raw,format=NV12,width=" + std::to_string(kWidth) +
                           ",height=" + std::to_string(kHeight) + ",framerate=20/1";
  const std::string line =
      "appsrc name=road format=time caps=" + caps + " ! opwarp rpy=0.01,0.02,-0.01 ! v.img " +
      "appsrc name=wide format=time caps=" + caps +
      " ! opwarp model-input=big_img rpy=0.01,0.02,-0.01 ! v.big_img " +
      "opvision name=v precision=fp32 model=" + Model("driving_vision_small.onnx") +
      " ! oppolicy precision=fp32 model=" + Model("driving_policy_small.onnx") +
      " ! opmsgsink name=sink location=/dev/null sync=false";
  GError *err = nullptr;
  GstElement *pipe = gst_parse_launch(line.c_str(), &err);
  ASSERT_TRUE(pipe && !err) << (err ? err->message : "?") << "\n" << line;
  GstElement *road = gst_bin_get_by_name(GST_BIN(pipe), "road");
  GstElement *wide = gst_bin_get_by_name(GST_BIN(pipe), "wide");
  GstElement *sink = gst_bin_get_by_name(GST_BIN(pipe), "sink");
  ASSERT_NE(gst_element_set_state(pipe, GST_STATE_PLAYING), GST_STATE_CHANGE_FAILURE)
      << Errors(pipe);

  std::vector<uint8_t> bytes(size_t(kWidth) * kHeight * 3 / 2);
  std::mt19937 rng(5);
  for (auto &b : bytes)
    b = uint8_t(rng());
  // Warm-up: model compilation, the uploaders' spare sources, the first frames' lazily made
  // device state.
  constexpr int kWarmup = 30;
  constexpr int kCounted = 100;
  long warmup_news = 0, warmup_objects = 0;
  g_counting = true;  // from the start: warm-up's allocations show the hooks are interposed
  for (int k = 0; k < kWarmup + kCounted; k++) {
    if (k == kWarmup) {
      warmup_news = g_news.exchange(0);
      warmup_objects = g_cl_objects.exchange(0);
      g_builds = 0;
      g_pool_allocs = 0;
      g_measuring = true;
    }
    const guint64 before = Messages(sink);
    for (GstElement *src : {road, wide}) {
      GstFlowReturn ret = GST_FLOW_OK;
      GstBuffer *b = Frame(bytes, k);
      g_signal_emit_by_name(src, "push-buffer", b, &ret);
      gst_buffer_unref(b);
      ASSERT_EQ(ret, GST_FLOW_OK) << "frame " << k;
    }
    // One frame at a time: the next is pushed once this one's messages are out.
    for (int ms = 0; Messages(sink) == before; ms++) {
      ASSERT_LT(ms, 60000) << "no message for frame " << k << ": " << Errors(pipe);
      g_usleep(1000);
    }
  }
  g_counting = false;
  g_measuring = false;
  EXPECT_GE(Messages(sink), guint64(kWarmup + kCounted));
  EXPECT_GT(warmup_news, 0) << "operator new is not interposed";
  EXPECT_GT(warmup_objects, 0) << "the OpenCL wrappers are not interposed";
  EXPECT_EQ(g_news.load(), 0) << "operator new calls over " << kCounted << " frames";
  EXPECT_EQ(g_cl_objects.load(), 0) << "OpenCL objects created over " << kCounted << " frames";
  EXPECT_EQ(g_builds.load(), 0) << "program builds over " << kCounted << " frames";
  // A buffer pool makes a buffer when none of its buffers is free. Our output pools make their
  // working set (kGstOpPoolWorkingSet) when activated, before the first frame; a frame at a
  // time never has more buffers out, however late the streaming threads release them.
  std::printf("allocations inside buffer pools after warm-up: %ld over %d frames\n",
              g_pool_allocs.load(), kCounted);
  RecordProperty("pool_allocations", int(g_pool_allocs.load()));
  EXPECT_EQ(g_pool_allocs.load(), 0) << "buffer pool allocations over " << kCounted << " frames";
  EXPECT_EQ(Errors(pipe), "");
  gst_element_set_state(pipe, GST_STATE_NULL);
  for (GstElement *e : {road, wide, sink})
    gst_object_unref(e);
  gst_object_unref(pipe);
}

}  // namespace
