// libgstop on the machine's OpenCL device (PoCL in CI): context sharing helpers, memory maps,
// copies, shares and last-writer events, keeping host memory alive until the device is done,
// uploads, pools and their lifetimes, tensor caps, frame meta.
#include <gtest/gtest.h>

#include <gst/gst.h>
#include <gst/video/video.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <numeric>
#include <thread>
#include <vector>

#include "op/gstop.h"

namespace {

class Op : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { gst_init(nullptr, nullptr); }
  void SetUp() override {
    auto ctx = gst_op_context_new("auto");
    ASSERT_TRUE(ctx.ok()) << ctx.status().ToString();
    ctx_ = ctx.value();
    allocator_ = gst_op_allocator_new(ctx_);
  }
  void TearDown() override {
    gst_clear_object(&allocator_);
    gst_clear_object(&ctx_);
  }
  GstMemory *Alloc(gsize size) {
    op::Status st;
    GstMemory *mem = gst_op_allocator_alloc(allocator_, size, &st);
    EXPECT_NE(mem, nullptr) << st.ToString();
    return mem;
  }
  static void Fill(GstMemory *mem, const std::vector<guint8> &bytes) {
    GstMapInfo map;
    ASSERT_TRUE(gst_memory_map(mem, &map, GST_MAP_WRITE));
    ASSERT_EQ(map.size, bytes.size());
    std::memcpy(map.data, bytes.data(), bytes.size());
    gst_memory_unmap(mem, &map);
  }
  static std::vector<guint8> Read(GstMemory *mem) {
    GstMapInfo map;
    if (!gst_memory_map(mem, &map, GST_MAP_READ))
      return {};
    std::vector<guint8> out(map.data, map.data + map.size);
    gst_memory_unmap(mem, &map);
    return out;
  }
  static std::vector<guint8> Pattern(size_t n, unsigned seed) {
    std::vector<guint8> v(n);
    for (size_t i = 0; i < n; i++)
      v[i] = static_cast<guint8>((i * 131 + seed * 17 + i / 251) & 0xff);
    return v;
  }

  GstOpContext *ctx_ = nullptr;
  GstAllocator *allocator_ = nullptr;
};

// ---- context ------------------------------------------------------------------------------

TEST_F(Op, ContextTravelsInAGstContext) {
  EXPECT_STREQ(gst_op_context_get_device_string(ctx_), "auto");
  GstContext *context = gst_context_new_op_context(ctx_);
  EXPECT_STREQ(gst_context_get_context_type(context), GST_OP_CONTEXT_TYPE);
  EXPECT_TRUE(gst_context_is_persistent(context));
  GstOpContext *back = gst_context_get_op_context(context);
  EXPECT_EQ(back, ctx_);
  gst_object_unref(back);
  gst_context_unref(context);

  GstContext *other = gst_context_new("some.other.context", TRUE);
  EXPECT_EQ(gst_context_get_op_context(other), nullptr);
  gst_context_unref(other);
}

TEST_F(Op, ContextMatchesTheSameDeviceAndRefusesOthers) {
  EXPECT_TRUE(gst_op_context_matches(ctx_, "auto"));
  EXPECT_TRUE(gst_op_context_matches(ctx_, ""));
  // On this machine auto and 0:0 are the same device only if there is one; check by id.
  auto sel = op::cl::SelectDevice("0:0");
  ASSERT_TRUE(sel.ok());
  EXPECT_EQ(gst_op_context_matches(ctx_, "0:0"),
            sel->info.device == gst_op_context_get_device(ctx_)->id());
  EXPECT_FALSE(gst_op_context_matches(ctx_, "no-such-device-xyz"));
}

// An element in a pipeline, so messages reach a bus we can read.
struct Host {
  GstElement *pipeline = gst_pipeline_new(nullptr);
  // A bin is the simplest element there is without loading any plugin.
  GstElement *element = gst_bin_new(nullptr);
  GstBus *bus = nullptr;
  Host() {
    gst_bin_add(GST_BIN(pipeline), element);
    bus = gst_element_get_bus(pipeline);
  }
  ~Host() {
    gst_object_unref(bus);
    gst_object_unref(pipeline);
  }
  GstMessage *Pop(GstMessageType type) { return gst_bus_pop_filtered(bus, type); }
};

TEST_F(Op, EnsureContextCreatesAndPostsHaveContext) {
  Host host;
  GstOpContext *ctx = nullptr;
  ASSERT_TRUE(gst_op_ensure_context(host.element, "auto", &ctx));
  ASSERT_NE(ctx, nullptr);
  GstMessage *need = host.Pop(GST_MESSAGE_NEED_CONTEXT);
  ASSERT_NE(need, nullptr);
  gst_message_unref(need);
  GstMessage *have = host.Pop(GST_MESSAGE_HAVE_CONTEXT);
  ASSERT_NE(have, nullptr);
  GstContext *context = nullptr;
  gst_message_parse_have_context(have, &context);
  GstOpContext *posted = gst_context_get_op_context(context);
  EXPECT_EQ(posted, ctx);
  gst_object_unref(posted);
  gst_context_unref(context);
  gst_message_unref(have);
  // Already set: nothing new happens.
  GstOpContext *before = ctx;
  ASSERT_TRUE(gst_op_ensure_context(host.element, "auto", &ctx));
  EXPECT_EQ(ctx, before);
  gst_object_unref(ctx);
}

TEST_F(Op, SetContextAcceptsMatchingAndRefusesOtherDevices) {
  Host host;
  GstContext *context = gst_context_new_op_context(ctx_);
  GstOpContext *got = nullptr;
  EXPECT_TRUE(gst_op_handle_set_context(host.element, context, "auto", &got));
  EXPECT_EQ(got, ctx_);
  gst_clear_object(&got);

  EXPECT_TRUE(gst_op_handle_set_context(host.element, context, "no-such-device-xyz", &got));
  EXPECT_EQ(got, nullptr);
  // Posted from another thread (a bin may call set_context holding its own lock).
  GstMessage *warning = gst_bus_timed_pop_filtered(host.bus, 10 * GST_SECOND, GST_MESSAGE_WARNING);
  ASSERT_NE(warning, nullptr) << "a refused context must be announced";
  GError *err = nullptr;
  gst_message_parse_warning(warning, &err, nullptr);
  EXPECT_NE(std::string(err->message).find("no-such-device-xyz"), std::string::npos)
      << err->message;
  g_error_free(err);
  gst_message_unref(warning);

  GstContext *foreign = gst_context_new("gst.gl.GLDisplay", TRUE);
  EXPECT_FALSE(gst_op_handle_set_context(host.element, foreign, "auto", &got));
  gst_context_unref(foreign);
  gst_context_unref(context);
}

TEST_F(Op, ContextQueryIsAnsweredOnlyForOurType) {
  Host host;
  GstQuery *query = gst_query_new_context(GST_OP_CONTEXT_TYPE);
  EXPECT_TRUE(gst_op_handle_context_query(host.element, query, ctx_));
  GstContext *context = nullptr;
  gst_query_parse_context(query, &context);
  GstOpContext *answered = gst_context_get_op_context(context);
  EXPECT_EQ(answered, ctx_);
  gst_object_unref(answered);
  gst_query_unref(query);

  query = gst_query_new_context("gst.gl.GLDisplay");
  EXPECT_FALSE(gst_op_handle_context_query(host.element, query, ctx_));
  gst_query_unref(query);
}

TEST_F(Op, UnknownDeviceIsAnElementErrorNamingIt) {
  Host host;
  GstOpContext *ctx = nullptr;
  EXPECT_FALSE(gst_op_ensure_context(host.element, "no-such-device-xyz", &ctx));
  EXPECT_EQ(ctx, nullptr);
  GstMessage *error = host.Pop(GST_MESSAGE_ERROR);
  ASSERT_NE(error, nullptr);
  GError *err = nullptr;
  gchar *debug = nullptr;
  gst_message_parse_error(error, &err, &debug);
  EXPECT_TRUE(g_error_matches(err, GST_RESOURCE_ERROR, GST_RESOURCE_ERROR_NOT_FOUND));
  EXPECT_NE(std::string(err->message).find("no-such-device-xyz"), std::string::npos)
      << err->message;
  EXPECT_NE(std::string(debug).find("matches no OpenCL device"), std::string::npos) << debug;
  g_error_free(err);
  g_free(debug);
  gst_message_unref(error);
}

// ---- memory --------------------------------------------------------------------------------

TEST_F(Op, HostMapsRoundTripAndRecordTheWriter) {
  GstMemory *mem = Alloc(4096);
  ASSERT_TRUE(gst_is_op_memory(mem));
  EXPECT_TRUE(gst_is_op_memory_on(mem, ctx_));
  EXPECT_EQ(gst_op_memory_get_context(mem), ctx_);
  EXPECT_STREQ(mem->allocator->mem_type, GST_OP_MEMORY_NAME);
  EXPECT_FALSE(gst_op_memory_get_write_event(mem));
  auto bytes = Pattern(4096, 1);
  Fill(mem, bytes);
  EXPECT_TRUE(gst_op_memory_get_write_event(mem)) << "a host write must leave its unmap event";
  EXPECT_EQ(Read(mem), bytes);
  gst_memory_unref(mem);
}

TEST_F(Op, ClMapReturnsTheBufferOnlyForOurMemory) {
  GstMemory *mem = Alloc(1024);
  GstMapInfo map;
  ASSERT_TRUE(gst_op_memory_map_cl(mem, &map, GST_MAP_READ));
  cl_mem buf = gst_op_map_info_get_cl_mem(&map);
  size_t size = 0;
  ASSERT_EQ(clGetMemObjectInfo(buf, CL_MEM_SIZE, sizeof(size), &size, nullptr), CL_SUCCESS);
  EXPECT_EQ(size, 1024u);
  gst_memory_unmap(mem, &map);
  gst_memory_unref(mem);

  GstMemory *sys = gst_allocator_alloc(nullptr, 1024, nullptr);
  EXPECT_FALSE(gst_is_op_memory(sys));
  EXPECT_FALSE(gst_op_memory_map_cl(sys, &map, GST_MAP_READ));
  gst_memory_unref(sys);
}

TEST_F(Op, CopyIsADeviceCopyOfTheRegion) {
  GstMemory *mem = Alloc(8192);
  auto bytes = Pattern(8192, 2);
  Fill(mem, bytes);
  GstMemory *copy = gst_memory_copy(mem, 100, 1000);
  ASSERT_NE(copy, nullptr);
  ASSERT_TRUE(gst_is_op_memory(copy));
  EXPECT_EQ(copy->size, 1000u);
  EXPECT_TRUE(gst_op_memory_get_write_event(copy));
  EXPECT_EQ(Read(copy), std::vector<guint8>(bytes.begin() + 100, bytes.begin() + 1100));
  // The copy is independent of its source.
  Fill(mem, Pattern(8192, 3));
  EXPECT_EQ(Read(copy), std::vector<guint8>(bytes.begin() + 100, bytes.begin() + 1100));
  gst_memory_unref(copy);

  GstMemory *whole = gst_memory_copy(mem, 0, -1);
  ASSERT_NE(whole, nullptr);
  EXPECT_EQ(Read(whole), Pattern(8192, 3));
  gst_memory_unref(whole);
  gst_memory_unref(mem);
}

TEST_F(Op, SharesAreViewsOfTheSameBuffer) {
  GstMemory *mem = Alloc(4096);
  auto bytes = Pattern(4096, 4);
  Fill(mem, bytes);
  GstMemory *a = gst_memory_share(mem, 256, 512);
  GstMemory *b = gst_memory_share(mem, 768, -1);
  ASSERT_TRUE(gst_is_op_memory(a));
  EXPECT_EQ(a->offset, 256u);
  EXPECT_EQ(b->size, 4096u - 768);
  EXPECT_EQ(Read(a), std::vector<guint8>(bytes.begin() + 256, bytes.begin() + 768));
  EXPECT_EQ(Read(b), std::vector<guint8>(bytes.begin() + 768, bytes.end()));

  GstMapInfo ma, mm;
  ASSERT_TRUE(gst_op_memory_map_cl(a, &ma, GST_MAP_READ));
  ASSERT_TRUE(gst_op_memory_map_cl(mem, &mm, GST_MAP_READ));
  EXPECT_EQ(gst_op_map_info_get_cl_mem(&ma), gst_op_map_info_get_cl_mem(&mm));
  gst_memory_unmap(a, &ma);
  gst_memory_unmap(mem, &mm);

  gsize offset = 1;
  EXPECT_TRUE(gst_memory_is_span(a, b, &offset));
  EXPECT_EQ(offset, 256u);
  // Views share the last writer.
  op::cl::EventHandle marker = *gst_op_context_get_queue(ctx_).Marker();
  gst_op_memory_set_write_event(a, marker.get());
  EXPECT_EQ(gst_op_memory_get_write_event(mem).get(), marker.get());
  gst_memory_unref(a);
  gst_memory_unref(b);
  gst_memory_unref(mem);
}

// Two branches of a tee map the same buffer from two threads (opmsgsink and opoverlay after
// oppolicy): every map must see the bytes, and overlapping maps must not invalidate each other.
TEST_F(Op, ConcurrentHostMapsOfOneBufferFromTwoThreads) {
  const size_t n = 1 << 16;
  GstMemory *mem = Alloc(n);
  auto bytes = Pattern(n, 9);
  Fill(mem, bytes);
  GstMemory *view = gst_memory_share(mem, 4096, 8192);
  std::atomic<int> bad{0};
  auto reader = [&](GstMemory *m, size_t offset, size_t size) {
    for (int i = 0; i < 300; i++) {
      GstMapInfo map;
      if (!gst_memory_map(m, &map, GST_MAP_READ)) {
        bad++;
        continue;
      }
      // Touch first, middle and last byte while the other thread maps and unmaps.
      if (map.size != size || map.data[0] != bytes[offset] ||
          map.data[size / 2] != bytes[offset + size / 2] ||
          map.data[size - 1] != bytes[offset + size - 1] ||
          std::memcmp(map.data, bytes.data() + offset, size) != 0)
        bad++;
      gst_memory_unmap(m, &map);
    }
  };
  std::thread a(reader, mem, 0, n), b(reader, view, 4096, 8192);
  a.join();
  b.join();
  EXPECT_EQ(bad.load(), 0);
  // Once every map is gone the device owns the buffer again: a write map then a read still work.
  auto again = Pattern(n, 10);
  Fill(mem, again);
  EXPECT_EQ(Read(mem), again);
  gst_memory_unref(view);
  gst_memory_unref(mem);
}

TEST_F(Op, HostMapWaitsForTheLastWritersEvent) {
  GstMemory *mem = Alloc(1 << 16);
  Fill(mem, std::vector<guint8>(1 << 16, 0));
  const auto &device = gst_op_context_get_device(ctx_);
  // The writer runs on another queue, so only the recorded event orders it before the map.
  auto other = op::cl::Queue::Create(*device);
  ASSERT_TRUE(other.ok());
  cl_int err = CL_SUCCESS;
  op::cl::EventHandle gate(clCreateUserEvent(device->context(), &err));
  ASSERT_EQ(err, CL_SUCCESS);
  GstMapInfo cl_map;
  ASSERT_TRUE(gst_op_memory_map_cl(mem, &cl_map, GST_MAP_WRITE));
  auto bytes = Pattern(1 << 16, 5);
  auto written = other->Write(gst_op_map_info_get_cl_mem(&cl_map), 0, bytes.size(), bytes.data(),
                              {gate.get()});
  ASSERT_TRUE(written.ok()) << written.status().ToString();
  ASSERT_TRUE(other->Flush().ok());
  gst_op_memory_set_write_event(mem, written->get());
  gst_memory_unmap(mem, &cl_map);

  std::atomic<bool> mapped{false};
  std::vector<guint8> seen;
  std::thread reader([&] {
    seen = Read(mem);
    mapped = true;
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  EXPECT_FALSE(mapped.load()) << "the map returned before the writer could run";
  ASSERT_EQ(clSetUserEventStatus(gate.get(), CL_COMPLETE), CL_SUCCESS);
  reader.join();
  EXPECT_TRUE(mapped.load());
  EXPECT_EQ(seen, bytes);
  gst_memory_unref(mem);
}

TEST_F(Op, CopyWaitsForTheWriterOnTheDeviceNotTheHost) {
  const size_t n = 1 << 16;
  GstMemory *mem = Alloc(n);
  Fill(mem, std::vector<guint8>(n, 0));
  const auto &device = gst_op_context_get_device(ctx_);
  auto other = op::cl::Queue::Create(*device);
  ASSERT_TRUE(other.ok());
  cl_int err = CL_SUCCESS;
  op::cl::EventHandle gate(clCreateUserEvent(device->context(), &err));
  ASSERT_EQ(err, CL_SUCCESS);
  GstMapInfo cl_map;
  ASSERT_TRUE(gst_op_memory_map_cl(mem, &cl_map, GST_MAP_WRITE));
  auto bytes = Pattern(n, 8);
  auto written =
      other->Write(gst_op_map_info_get_cl_mem(&cl_map), 0, n, bytes.data(), {gate.get()});
  ASSERT_TRUE(written.ok());
  ASSERT_TRUE(other->Flush().ok());
  gst_op_memory_set_write_event(mem, written->get());
  gst_memory_unmap(mem, &cl_map);

  // The copy is only enqueued: it returns while the writer still waits for the gate.
  GstMemory *copy = gst_memory_copy(mem, 0, -1);
  ASSERT_NE(copy, nullptr);
  op::cl::EventHandle copy_event = gst_op_memory_get_write_event(copy);
  ASSERT_TRUE(copy_event);
  cl_int status = CL_COMPLETE;
  ASSERT_EQ(clGetEventInfo(copy_event.get(), CL_EVENT_COMMAND_EXECUTION_STATUS, sizeof(status),
                           &status, nullptr),
            CL_SUCCESS);
  EXPECT_NE(status, CL_COMPLETE) << "the copy ran before its source was written";
  ASSERT_EQ(clSetUserEventStatus(gate.get(), CL_COMPLETE), CL_SUCCESS);
  EXPECT_EQ(Read(copy), bytes);
  gst_memory_unref(copy);
  gst_memory_unref(mem);
}

// ---- Status at the GObject edge -------------------------------------------------------------

TEST(StatusError, MissingFilesOfALoadAreResourceErrorsOtherwiseTheCallersDomain) {
  GQuark domain = 0;
  gint code = 0;
  gst_op_status_error_code(op::NotFound("model.onnx: no such file"), GST_LIBRARY_ERROR,
                           GST_LIBRARY_ERROR_INIT, &domain, &code);
  EXPECT_EQ(domain, GST_RESOURCE_ERROR);
  EXPECT_EQ(code, GST_RESOURCE_ERROR_NOT_FOUND);
  gst_op_status_error_code(op::IoError("model.onnx: permission denied"), GST_LIBRARY_ERROR,
                           GST_LIBRARY_ERROR_INIT, &domain, &code);
  EXPECT_EQ(domain, GST_RESOURCE_ERROR);
  EXPECT_EQ(code, GST_RESOURCE_ERROR_NOT_FOUND);
  gst_op_status_error_code(op::Corrupt("model.onnx: truncated"), GST_LIBRARY_ERROR,
                           GST_LIBRARY_ERROR_INIT, &domain, &code);
  EXPECT_EQ(domain, GST_LIBRARY_ERROR);
  EXPECT_EQ(code, GST_LIBRARY_ERROR_INIT);
  // A tensor that is not there is not a missing file: the caller's domain stays.
  gst_op_status_error_code(op::NotFound("no slice \"hidden_state\""), GST_CORE_ERROR,
                           GST_CORE_ERROR_NEGOTIATION, &domain, &code);
  EXPECT_EQ(domain, GST_CORE_ERROR);
  EXPECT_EQ(code, GST_CORE_ERROR_NEGOTIATION);
  gst_op_status_error_code(op::IoError("disk full"), GST_RESOURCE_ERROR, GST_RESOURCE_ERROR_WRITE,
                           &domain, &code);
  EXPECT_EQ(domain, GST_RESOURCE_ERROR);
  EXPECT_EQ(code, GST_RESOURCE_ERROR_WRITE);
}

TEST(StatusError, MacroPostsTheTextAndTheStatusAsDebug) {
  gst_init(nullptr, nullptr);
  GstElement *bin = gst_pipeline_new("p");
  GstBus *bus = gst_element_get_bus(bin);
  GST_OP_ELEMENT_ERROR_STATUS(bin, op::NotFound("/models/x.onnx: no such file"), LIBRARY, INIT,
                              ("Could not load the model \"%s\".", "/models/x.onnx"));
  GstMessage *m = gst_bus_pop_filtered(bus, GST_MESSAGE_ERROR);
  ASSERT_TRUE(m);
  GError *err = nullptr;
  gchar *debug = nullptr;
  gst_message_parse_error(m, &err, &debug);
  EXPECT_TRUE(g_error_matches(err, GST_RESOURCE_ERROR, GST_RESOURCE_ERROR_NOT_FOUND));
  EXPECT_STREQ(err->message, "Could not load the model \"/models/x.onnx\".");
  EXPECT_NE(std::string(debug).find("/models/x.onnx: no such file"), std::string::npos) << debug;
  g_error_free(err);
  g_free(debug);
  gst_message_unref(m);
  gst_object_unref(bus);
  gst_object_unref(bin);
}

// ---- GstOpRef ---------------------------------------------------------------------------------

TEST(GstOpRef, TakesCopiesMovesAndReleasesReferences) {
  gst_init(nullptr, nullptr);
  GstBuffer *raw = gst_buffer_new();
  gst_buffer_ref(raw);  // the test's own reference, so the count stays readable
  {
    GstOpRef<GstBuffer> a(raw);  // takes one
    EXPECT_EQ(GST_MINI_OBJECT_REFCOUNT_VALUE(raw), 2);
    GstOpRef<GstBuffer> b = a;  // copies ref
    EXPECT_EQ(GST_MINI_OBJECT_REFCOUNT_VALUE(raw), 3);
    GstOpRef<GstBuffer> c = std::move(b);  // moves do not
    EXPECT_FALSE(b);
    EXPECT_EQ(GST_MINI_OBJECT_REFCOUNT_VALUE(raw), 3);
    auto d = GstOpRef<GstBuffer>::Ref(raw);  // adds one
    EXPECT_EQ(GST_MINI_OBJECT_REFCOUNT_VALUE(raw), 4);
    GstBuffer *handed = d.release();  // hands one on
    EXPECT_EQ(GST_MINI_OBJECT_REFCOUNT_VALUE(raw), 4);
    gst_buffer_unref(handed);
  }
  EXPECT_EQ(GST_MINI_OBJECT_REFCOUNT_VALUE(raw), 1);
  gst_buffer_unref(raw);

  GstElement *bin = gst_bin_new("b");
  {
    auto o = GstOpRef<GstElement>::Ref(bin);
    EXPECT_EQ(GST_OBJECT_REFCOUNT_VALUE(bin), 2);
  }
  EXPECT_EQ(GST_OBJECT_REFCOUNT_VALUE(bin), 1);
  gst_object_unref(bin);
}

// ---- latency ---------------------------------------------------------------------------------

// Announced when a measurement exceeds the last announced one by more than a quarter; queries
// add the longest measured.
TEST(LatencyReporter, AnnouncesGrowthBeyondAQuarterAndQueriesAddTheMaximum) {
  gst_init(nullptr, nullptr);
  GstOpLatencyReporter r;
  EXPECT_TRUE(r.Note(4 * GST_MSECOND));
  EXPECT_FALSE(r.Note(5 * GST_MSECOND));  // exactly a quarter more: not yet
  EXPECT_EQ(r.max(), 5 * GST_MSECOND);
  EXPECT_FALSE(r.Note(3 * GST_MSECOND));
  EXPECT_TRUE(r.Note(5 * GST_MSECOND + 1));
  EXPECT_FALSE(r.Note(6 * GST_MSECOND));
  GstQuery *q = gst_query_new_latency();
  gst_query_set_latency(q, TRUE, 10 * GST_MSECOND, GST_CLOCK_TIME_NONE);
  r.AddTo(q);
  gboolean live = FALSE;
  GstClockTime min = 0, max = 0;
  gst_query_parse_latency(q, &live, &min, &max);
  EXPECT_TRUE(live);
  EXPECT_EQ(min, 16 * GST_MSECOND);
  EXPECT_EQ(max, GST_CLOCK_TIME_NONE);
  gst_query_unref(q);
  // A valid maximum grows by the frames a live pipeline may have on the device, each as long
  // as the longest measured.
  q = gst_query_new_latency();
  gst_query_set_latency(q, FALSE, 10 * GST_MSECOND, 100 * GST_MSECOND);
  r.AddTo(q);
  gst_query_parse_latency(q, &live, &min, &max);
  EXPECT_FALSE(live);
  EXPECT_EQ(min, 16 * GST_MSECOND);
  EXPECT_EQ(max, 100 * GST_MSECOND + kGstOpMaxFramesInFlight * 6 * GST_MSECOND);
  EXPECT_EQ(r.max_in_flight(), kGstOpMaxFramesInFlight * 6 * GST_MSECOND);
  gst_query_unref(q);
  r.Reset();
  EXPECT_EQ(r.max(), 0u);
  EXPECT_TRUE(r.Note(GST_MSECOND));
}

// ---- keeping host memory alive until the device is done ----------------------------------

// The work runs only once its event completes, and Drain() returns only after all of it ran.
TEST_F(Op, KeepAliveRunsWhenTheEventCompletesAndDrainWaitsForIt) {
  const auto &device = gst_op_context_get_device(ctx_);
  cl_int err = CL_SUCCESS;
  op::cl::EventHandle gate(clCreateUserEvent(device->context(), &err));
  ASSERT_EQ(err, CL_SUCCESS);
  std::atomic<int> ran{0};
  std::atomic<cl_int> seen{1};
  struct Probe {
    std::atomic<int> *ran;
    std::atomic<cl_int> *seen;
  } probe{&ran, &seen};
  auto fn = [](void *data, cl_int status) {
    auto *p = static_cast<Probe *>(data);
    p->seen->store(status);
    p->ran->fetch_add(1);
  };
  GstOpKeepAlive keep;
  for (int i = 0; i < 3; i++)
    keep.OnComplete(gate.get(), fn, &probe);
  EXPECT_EQ(keep.in_flight(), 3);
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_EQ(ran.load(), 0) << "ran before the event completed";
  std::atomic<bool> drained{false};
  std::thread drainer([&] {
    keep.Drain();
    drained = true;
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_FALSE(drained.load()) << "Drain returned with work in flight";
  ASSERT_EQ(clSetUserEventStatus(gate.get(), CL_COMPLETE), CL_SUCCESS);
  drainer.join();
  EXPECT_EQ(ran.load(), 3);
  EXPECT_EQ(seen.load(), CL_COMPLETE);
  EXPECT_EQ(keep.in_flight(), 0);
}

// More registrations than the table holds: the extra ones wait for their event (already
// complete here) and run at once, so none is lost.
TEST_F(Op, KeepAliveBeyondItsTableStillRunsEveryOne) {
  const auto &device = gst_op_context_get_device(ctx_);
  cl_int err = CL_SUCCESS;
  op::cl::EventHandle gate(clCreateUserEvent(device->context(), &err));
  ASSERT_EQ(err, CL_SUCCESS);
  op::cl::EventHandle done(clCreateUserEvent(device->context(), &err));
  ASSERT_EQ(clSetUserEventStatus(done.get(), CL_COMPLETE), CL_SUCCESS);
  std::atomic<int> ran{0};
  auto fn = [](void *data, cl_int) { static_cast<std::atomic<int> *>(data)->fetch_add(1); };
  GstOpKeepAlive keep;
  for (size_t i = 0; i < GstOpKeepAlive::kSlots; i++)
    keep.OnComplete(gate.get(), fn, &ran);
  keep.OnComplete(done.get(), fn, &ran);  // no slot left: runs before returning
  EXPECT_EQ(ran.load(), 1);
  ASSERT_EQ(clSetUserEventStatus(gate.get(), CL_COMPLETE), CL_SUCCESS);
  keep.Drain();
  EXPECT_EQ(ran.load(), int(GstOpKeepAlive::kSlots) + 1);
}

// A direct (unstaged) upload keeps the input referenced until the device has read it; a staged
// one gives it back at once. Both write the input's bytes.
TEST_F(Op, UploaderHoldsTheInputUntilTheDeviceReadIt) {
  const auto &device = gst_op_context_get_device(ctx_);
  const size_t n = 4096;
  for (bool staged : {false, true}) {
    GstOpUploader uploader(nullptr, ctx_, staged);
    ASSERT_EQ(uploader.staging(), staged || device->buffer_policy().staging_uploads);
    auto bytes = Pattern(n, staged ? 3 : 4);
    GstBuffer *in = gst_buffer_new_memdup(bytes.data(), n);
    GstMemory *out = Alloc(n);
    GstMapInfo cl_map;
    ASSERT_TRUE(gst_op_memory_map_cl(out, &cl_map, GST_MAP_WRITE));
    cl_int err = CL_SUCCESS;
    op::cl::EventHandle gate(clCreateUserEvent(device->context(), &err));
    ASSERT_EQ(err, CL_SUCCESS);
    auto written = uploader.WriteBuffer(in, n, gst_op_map_info_get_cl_mem(&cl_map), {gate.get()});
    ASSERT_TRUE(written.ok()) << written.status().ToString();
    gst_op_memory_set_write_event(out, written->get());
    gst_memory_unmap(out, &cl_map);
    if (uploader.staging())
      EXPECT_EQ(GST_MINI_OBJECT_REFCOUNT_VALUE(in), 1) << "staged input not given back";
    else
      EXPECT_EQ(GST_MINI_OBJECT_REFCOUNT_VALUE(in), 2) << "input released before the write";
    ASSERT_EQ(clSetUserEventStatus(gate.get(), CL_COMPLETE), CL_SUCCESS);
    EXPECT_EQ(Read(out), bytes);
    uploader.Drain();
    EXPECT_EQ(GST_MINI_OBJECT_REFCOUNT_VALUE(in), 1);
    // Too small an input is refused naming both sizes.
    auto small = uploader.WriteBuffer(in, 2 * n, gst_op_map_info_get_cl_mem(&cl_map), {});
    ASSERT_FALSE(small.ok());
    EXPECT_NE(small.status().ToString().find("4096 bytes is smaller than the 8192"),
              std::string::npos)
        << small.status().ToString();
    gst_buffer_unref(in);
    gst_memory_unref(out);
  }
}

// ---- reading tensors back ------------------------------------------------------------------

// float16 in OpenCL memory (read through the queue) and float32 in system memory come back as
// the same floats; a short memory and a non-float tensor are refused saying why.
TEST_F(Op, TensorsReadBackAsFloats) {
  const std::vector<uint16_t> halves = {0x3c00, 0xc000, 0x3555, 0x0001, 0x7bff, 0x0000};
  const std::vector<float> expected = {1.0f,     -2.0f, 0.333251953125f, 5.96046448e-08f,
                                       65504.0f, 0.0f};
  GstMemory *mem = Alloc(halves.size() * 2);
  std::vector<guint8> bytes(halves.size() * 2);
  std::memcpy(bytes.data(), halves.data(), bytes.size());
  Fill(mem, bytes);
  GstOpTensorDesc half_desc{"out", GstOpTensorType::kFloat16, {1, int64_t(halves.size())}};
  std::vector<float> out(halves.size());
  std::vector<uint16_t> scratch;
  op::Status st = gst_op_tensor_read_floats(mem, half_desc, out.data(), &scratch);
  ASSERT_TRUE(st.ok()) << st.ToString();
  EXPECT_EQ(out, expected);

  GstOpTensorDesc float_desc{"out", GstOpTensorType::kFloat32, {1, 6}};
  GstMemory *sys = gst_allocator_alloc(nullptr, sizeof(float) * 6, nullptr);
  GstMapInfo map;
  ASSERT_TRUE(gst_memory_map(sys, &map, GST_MAP_WRITE));
  std::memcpy(map.data, expected.data(), sizeof(float) * 6);
  gst_memory_unmap(sys, &map);
  std::fill(out.begin(), out.end(), 0.0f);
  st = gst_op_tensor_read_floats(sys, float_desc, out.data(), &scratch);
  ASSERT_TRUE(st.ok()) << st.ToString();
  EXPECT_EQ(out, expected);

  // The half memory is 12 bytes; as float32 it would need 24.
  st = gst_op_tensor_read_floats(mem, float_desc, out.data(), &scratch);
  EXPECT_NE(st.ToString().find("it has 12 bytes, its caps say 24"), std::string::npos)
      << st.ToString();
  GstOpTensorDesc bytes_desc{"img", GstOpTensorType::kUint8, {1, 12}};
  st = gst_op_tensor_read_floats(mem, bytes_desc, out.data(), &scratch);
  EXPECT_EQ(st.code(), op::StatusCode::kUnsupported) << st.ToString();
  gst_memory_unref(sys);
  gst_memory_unref(mem);
}

// ---- pools ---------------------------------------------------------------------------------

static GstCaps *Nv12Caps(int w, int h) {
  return gst_caps_new_simple("video/x-raw", "format", G_TYPE_STRING, "NV12", "width", G_TYPE_INT, w,
                             "height", G_TYPE_INT, h, "framerate", GST_TYPE_FRACTION, 20, 1,
                             nullptr);
}

static GstBufferPool *ConfiguredPool(GstOpContext *ctx, GstCaps *caps, bool camera,
                                     const GstVideoInfo *layout = nullptr) {
  GstBufferPool *pool = gst_op_buffer_pool_new(ctx);
  GstStructure *config = gst_buffer_pool_get_config(pool);
  gst_buffer_pool_config_set_params(config, caps, 0, 2, 4);
  if (camera)
    gst_buffer_pool_config_set_op_camera_layout(config);
  if (layout)
    gst_buffer_pool_config_set_op_video_layout(config, layout);
  if (!gst_buffer_pool_set_config(pool, config))
    gst_clear_object(&pool);
  return pool;
}

TEST_F(Op, CameraLayoutOfATiciFrame) {
  GstVideoInfo info;
  gst_video_info_set_format(&info, GST_VIDEO_FORMAT_NV12, 1928, 1208);
  ASSERT_TRUE(gst_op_video_info_set_camera_layout(&info));
  EXPECT_EQ(info.stride[0], 2048);
  EXPECT_EQ(info.stride[1], 2048);
  EXPECT_EQ(info.offset[1], 2490368u);
  EXPECT_EQ(info.size, 2490368u + 2048u * 608);
  gst_video_info_set_format(&info, GST_VIDEO_FORMAT_NV12, 1344, 760);
  ASSERT_TRUE(gst_op_video_info_set_camera_layout(&info));
  EXPECT_EQ(info.stride[0], 1408);
  EXPECT_EQ(info.offset[1], 1081344u);
  gst_video_info_set_format(&info, GST_VIDEO_FORMAT_I420, 64, 64);
  EXPECT_FALSE(gst_op_video_info_set_camera_layout(&info));
}

TEST_F(Op, VideoPoolBuffersCarryTheirLayout) {
  GstCaps *caps = Nv12Caps(1928, 1208);
  struct Case {
    bool camera;
    gint stride;
    gsize uv_offset;
  } cases[] = {{true, 2048, 2490368}, {false, 1928, 1928u * 1208}};
  for (const Case &c : cases) {
    GstBufferPool *pool = ConfiguredPool(ctx_, caps, c.camera);
    ASSERT_NE(pool, nullptr);
    ASSERT_TRUE(gst_buffer_pool_set_active(pool, TRUE));
    GstBuffer *buf = nullptr;
    ASSERT_EQ(gst_buffer_pool_acquire_buffer(pool, &buf, nullptr), GST_FLOW_OK);
    ASSERT_EQ(gst_buffer_n_memory(buf), 1u);
    EXPECT_TRUE(gst_is_op_memory(gst_buffer_peek_memory(buf, 0)));
    GstVideoMeta *meta = gst_buffer_get_video_meta(buf);
    ASSERT_NE(meta, nullptr);
    EXPECT_EQ(meta->stride[0], c.stride);
    EXPECT_EQ(meta->stride[1], c.stride);
    EXPECT_EQ(meta->offset[0], 0u);
    EXPECT_EQ(meta->offset[1], c.uv_offset);
    EXPECT_GE(gst_buffer_get_size(buf), c.uv_offset + c.stride * 604u);
    gst_buffer_unref(buf);
    ASSERT_TRUE(gst_buffer_pool_set_active(pool, FALSE));
    gst_object_unref(pool);
  }
  // An explicit layout, and one that does not fit.
  GstVideoInfo layout;
  gst_video_info_from_caps(&layout, caps);
  layout.stride[0] = layout.stride[1] = 2000;
  layout.offset[1] = 2000u * 1210;
  layout.size = layout.offset[1] + 2000u * 604;
  GstBufferPool *pool = ConfiguredPool(ctx_, caps, false, &layout);
  ASSERT_NE(pool, nullptr);
  GstVideoInfo got;
  ASSERT_TRUE(gst_op_buffer_pool_get_video_info(pool, &got));
  EXPECT_TRUE(gst_op_video_info_same_layout(&got, &layout));
  gst_object_unref(pool);
  layout.stride[1] = 1000;  // narrower than a UV row
  EXPECT_EQ(ConfiguredPool(ctx_, caps, false, &layout), nullptr);
  gst_caps_unref(caps);
}

TEST_F(Op, TensorPoolHasOneMemoryPerTensorInCapsOrder) {
  GstCaps *caps = gst_caps_from_string(
      "application/x-op-tensors, names=(string)<\"a\", \"b\">, types=(string)<\"float32\", "
      "\"uint8\">, dims=(string)<\"1,3,13\", \"127\">");
  GstBufferPool *pool = ConfiguredPool(ctx_, caps, false);
  ASSERT_NE(pool, nullptr);
  ASSERT_TRUE(gst_buffer_pool_set_active(pool, TRUE));
  GstBuffer *buf = nullptr;
  ASSERT_EQ(gst_buffer_pool_acquire_buffer(pool, &buf, nullptr), GST_FLOW_OK);
  ASSERT_EQ(gst_buffer_n_memory(buf), 2u);
  EXPECT_EQ(gst_buffer_peek_memory(buf, 0)->size, 1u * 3 * 13 * 4);
  EXPECT_EQ(gst_buffer_peek_memory(buf, 1)->size, 127u);
  EXPECT_EQ(gst_buffer_get_video_meta(buf), nullptr);
  gst_buffer_unref(buf);
  gst_buffer_pool_set_active(pool, FALSE);
  gst_object_unref(pool);
  gst_caps_unref(caps);
}

// A tracked frame counts until its buffer went back to the pool and the device finished what
// was enqueued before that; beyond the table a frame is not tracked; a buffer released after
// its gate's owner let go is safe.
TEST_F(Op, FrameGateCountsAFrameUntilReleasedAndDone) {
  GstCaps *caps = gst_caps_from_string(
      "application/x-op-tensors, names=(string)<\"a\">, types=(string)<\"uint8\">, "
      "dims=(string)<\"16\">");
  GstBufferPool *pool = ConfiguredPool(ctx_, caps, false);
  ASSERT_NE(pool, nullptr);
  ASSERT_TRUE(gst_buffer_pool_set_active(pool, TRUE));
  GstOpFrameGate *gate = GstOpFrameGate::New();
  GstBuffer *buf = nullptr;
  ASSERT_EQ(gst_buffer_pool_acquire_buffer(pool, &buf, nullptr), GST_FLOW_OK);
  ASSERT_TRUE(gate->Track(buf, ctx_));
  EXPECT_EQ(gate->in_flight(), 1);

  // The queue is held up by a command that waits for a user event: what the consumer
  // "enqueued" for the frame has not run when it releases the buffer.
  const auto &device = gst_op_context_get_device(ctx_);
  op::cl::Queue &queue = gst_op_context_get_queue(ctx_);
  cl_int err = CL_SUCCESS;
  op::cl::EventHandle hold(clCreateUserEvent(device->context(), &err));
  ASSERT_EQ(err, CL_SUCCESS);
  op::cl::EventList wait;
  wait.Add(hold.get());
  auto held = queue.Marker(wait);
  ASSERT_TRUE(held.ok());
  ASSERT_TRUE(queue.Flush().ok());
  gst_buffer_unref(buf);  // back to the pool: the meta goes, a marker is enqueued
  EXPECT_EQ(gate->in_flight(), 1) << "released, but the device has not finished";
  ASSERT_EQ(clSetUserEventStatus(hold.get(), CL_COMPLETE), CL_SUCCESS);
  ASSERT_TRUE(queue.Finish().ok());
  EXPECT_EQ(gate->in_flight(), 0);

  // The table is bounded: beyond it a frame is not tracked (and carries no meta).
  std::vector<GstBuffer *> bufs;
  for (int i = 0; i <= GstOpFrameGate::kSlots; i++) {
    GstBuffer *b = gst_buffer_new();
    EXPECT_EQ(gate->Track(b, ctx_), i < GstOpFrameGate::kSlots) << i;
    bufs.push_back(b);
  }
  EXPECT_EQ(gate->in_flight(), GstOpFrameGate::kSlots);
  // The owner lets go first; the buffers' metas keep the gate until the last is freed.
  gate->Unref();
  for (GstBuffer *b : bufs)
    gst_buffer_unref(b);
  ASSERT_TRUE(queue.Finish().ok());
  gst_buffer_pool_set_active(pool, FALSE);
  gst_object_unref(pool);
  gst_caps_unref(caps);
}

// Two producers share a gate: a frame and its twin (capture times within the twin window) are
// one frame on the device, admitted or dropped together, whatever the room when the second comes.
TEST_F(Op, FrameGateAdmitsAndDropsTwinsTogether) {
  constexpr int kMax = int(kGstOpMaxFramesInFlight);
  GstOpFrameGate *gate = GstOpFrameGate::New();
  const int road = gate->AddProducer(), wide = gate->AddProducer();
  ASSERT_NE(road, wide);
  const GstClockTime ms = GST_MSECOND;
  const int a = gate->Admit(road, 0, kMax);
  ASSERT_GE(a, 0);
  EXPECT_EQ(gate->Admit(wide, 3 * ms, kMax), a) << "the twin shares the slot";
  EXPECT_EQ(gate->in_flight(), 1);
  const int b = gate->Admit(wide, 50 * ms, kMax);  // the wide camera ahead this time
  ASSERT_GE(b, 0);
  EXPECT_NE(b, a);
  EXPECT_EQ(gate->in_flight(), 2);
  EXPECT_EQ(gate->Admit(wide, 100 * ms, kMax), -1) << "two frames on the device";
  EXPECT_EQ(gate->Admit(road, 49 * ms, kMax), b);
  // Room again (both of the first pair give their places back), but the road twin of the
  // dropped wide frame follows the drop; the next frame is decided on its own.
  gate->Cancel(a);
  gate->Cancel(a);
  EXPECT_EQ(gate->in_flight(), 1);
  EXPECT_EQ(gate->Admit(road, 99 * ms, kMax), -1) << "its twin was dropped";
  const int c = gate->Admit(road, 150 * ms, kMax);
  EXPECT_GE(c, 0);
  // Not a twin: 25 ms or more apart, and a decision is followed once per producer.
  EXPECT_EQ(gate->Admit(wide, 125 * ms, kMax), -1) << "two frames on the device";
  EXPECT_EQ(gate->Admit(wide, 150 * ms, kMax), c);
  EXPECT_EQ(gate->Admit(wide, 151 * ms, kMax), -1) << "two frames on the device";
  gate->Cancel(b);
  gate->Cancel(b);
  gate->Cancel(c);
  gate->Cancel(c);
  EXPECT_EQ(gate->in_flight(), 0);
  // A twin that comes after its partner is done (the consumer took the partner alone) is
  // dropped: nothing would pair with it.
  const int d = gate->Admit(road, 200 * ms, kMax);
  ASSERT_GE(d, 0);
  gate->Cancel(d);
  EXPECT_EQ(gate->in_flight(), 0);
  EXPECT_EQ(gate->Admit(wide, 201 * ms, kMax), -1) << "its twin is done";
  // Without a time, or alone, a frame is decided on its own.
  EXPECT_GE(gate->Admit(road, GST_CLOCK_TIME_NONE, kMax), 0);
  gate->Unref();
  GstOpFrameGate *alone = GstOpFrameGate::New();
  const int only = alone->AddProducer();
  EXPECT_GE(alone->Admit(only, 0, kMax), 0);
  EXPECT_GE(alone->Admit(only, 1 * ms, kMax), 0) << "one producer has no twins";
  EXPECT_EQ(alone->Admit(only, 2 * ms, kMax), -1);
  alone->Unref();
}

// A producer far behind the other (a slow decoder) still drops the twins of the other's drops,
// also when those decisions are too old for the gate to remember one by one.
TEST_F(Op, FrameGateLaggingTwinStillFollowsOldDrops) {
  constexpr int kMax = int(kGstOpMaxFramesInFlight);
  GstOpFrameGate *gate = GstOpFrameGate::New();
  const int road = gate->AddProducer(), wide = gate->AddProducer();
  const GstClockTime ms = GST_MSECOND;
  std::vector<int> kept;
  for (int i = 0; i < kMax; i++) {
    kept.push_back(gate->Admit(road, i * 50 * ms, kMax));
    ASSERT_GE(kept.back(), 0) << i;
  }
  // The device is full: the next 100 road frames are dropped, more than the 64 decisions the
  // gate remembers.
  constexpr int kDropped = 100;
  for (int i = kMax; i < kMax + kDropped; i++)
    EXPECT_EQ(gate->Admit(road, i * 50 * ms, kMax), -1) << i;
  for (int slot : kept)
    gate->Cancel(slot);
  EXPECT_EQ(gate->in_flight(), 0);
  // The wide camera comes to the twins of the first drops: there is room, but nothing would
  // pair with them on the device.
  EXPECT_EQ(gate->Admit(wide, kMax * 50 * ms + 2 * ms, kMax), -1) << "forgotten, still dropped";
  EXPECT_EQ(gate->Admit(wide, (kMax + 10) * 50 * ms + 2 * ms, kMax), -1);
  EXPECT_EQ(gate->Admit(wide, (kMax + kDropped - 1) * 50 * ms + 2 * ms, kMax), -1)
      << "remembered, followed";
  EXPECT_EQ(gate->in_flight(), 0);
  const int ahead = gate->Admit(wide, (kMax + kDropped) * 50 * ms, kMax);
  EXPECT_GE(ahead, 0) << "ahead: decided alone";
  gate->Cancel(ahead);
  // A flush restarts running time: the old decisions, forgotten ones included, no longer hold.
  const int restarted = gate->Admit(road, 2 * ms, kMax);
  EXPECT_GE(restarted, 0) << "running time went back: decided afresh";
  EXPECT_EQ(gate->Admit(wide, 3 * ms, kMax), restarted) << "and twins pair again";
  gate->Unref();
}

TEST_F(Op, PoolStopsAndRestarts) {
  GstCaps *caps = Nv12Caps(64, 48);
  GstBufferPool *pool = ConfiguredPool(ctx_, caps, true);
  ASSERT_NE(pool, nullptr);
  for (int round = 0; round < 3; round++) {
    ASSERT_TRUE(gst_buffer_pool_set_active(pool, TRUE)) << round;
    GstBuffer *buf = nullptr;
    ASSERT_EQ(gst_buffer_pool_acquire_buffer(pool, &buf, nullptr), GST_FLOW_OK) << round;
    Fill(gst_buffer_peek_memory(buf, 0), Pattern(gst_buffer_get_size(buf), round));
    EXPECT_EQ(Read(gst_buffer_peek_memory(buf, 0)), Pattern(gst_buffer_get_size(buf), round));
    gst_buffer_unref(buf);
    ASSERT_TRUE(gst_buffer_pool_set_active(pool, FALSE)) << round;
    buf = nullptr;
    EXPECT_EQ(gst_buffer_pool_acquire_buffer(pool, &buf, nullptr), GST_FLOW_FLUSHING) << round;
  }
  gst_object_unref(pool);
  gst_caps_unref(caps);
}

static void SetFlag(gpointer data, GObject *) {
  *static_cast<bool *>(data) = true;
}

TEST_F(Op, AllocatorOutlivesItsPoolWhileMemoriesLive) {
  GstCaps *caps = Nv12Caps(64, 48);
  GstBufferPool *pool = ConfiguredPool(ctx_, caps, false);
  gst_caps_unref(caps);
  ASSERT_NE(pool, nullptr);
  ASSERT_TRUE(gst_buffer_pool_set_active(pool, TRUE));
  GstBuffer *buf = nullptr;
  ASSERT_EQ(gst_buffer_pool_acquire_buffer(pool, &buf, nullptr), GST_FLOW_OK);
  GstMemory *mem = gst_memory_ref(gst_buffer_peek_memory(buf, 0));
  auto bytes = Pattern(mem->size, 6);
  Fill(mem, bytes);

  bool pool_gone = false, allocator_gone = false;
  g_object_weak_ref(G_OBJECT(pool), SetFlag, &pool_gone);
  g_object_weak_ref(G_OBJECT(mem->allocator), SetFlag, &allocator_gone);
  gst_buffer_unref(buf);
  ASSERT_TRUE(gst_buffer_pool_set_active(pool, FALSE));
  gst_object_unref(pool);
  EXPECT_TRUE(pool_gone);
  EXPECT_FALSE(allocator_gone);
  EXPECT_EQ(Read(mem), bytes);
  gst_memory_unref(mem);
  EXPECT_TRUE(allocator_gone) << "the last memory must release the pool's allocator";
}

// ---- tensor caps -----------------------------------------------------------------------------

TEST(TensorCaps, RoundTrip) {
  gst_init(nullptr, nullptr);
  const char *text =
      "application/x-op-tensors, names=(string)<\"outputs\", \"hidden\">, "
      "types=(string)<\"float32\", \"float16\">, dims=(string)<\"1,6504\", \"1,25,512\">, "
      "slices=(string)<\"pose:0:12\", \"lane_lines:12:540\", \"hidden/h:0:512\">";
  GstCaps *caps = gst_caps_from_string(text);
  ASSERT_NE(caps, nullptr);
  auto info = gst_op_tensor_info_from_caps(caps);
  ASSERT_TRUE(info.ok()) << info.status().ToString();
  ASSERT_EQ(info->tensors.size(), 2u);
  EXPECT_EQ(info->tensors[0].name, "outputs");
  EXPECT_EQ(info->tensors[0].type, GstOpTensorType::kFloat32);
  EXPECT_EQ(info->tensors[0].dims, (std::vector<int64_t>{1, 6504}));
  EXPECT_EQ(info->tensors[1].type, GstOpTensorType::kFloat16);
  EXPECT_EQ(info->tensors[1].bytes(), 25u * 512 * 2);
  EXPECT_EQ(info->bytes(), 6504u * 4 + 25u * 512 * 2);
  ASSERT_EQ(info->slices.size(), 3u);
  EXPECT_EQ(info->slices[1].tensor, "outputs");
  EXPECT_EQ(info->slices[1].start, 12);
  EXPECT_EQ(info->slices[1].end, 540);
  EXPECT_EQ(info->slices[2].tensor, "hidden");
  EXPECT_EQ(info->FindSlice("h"), &info->slices[2]);
  EXPECT_EQ(info->Find("hidden"), 1);

  GstCaps *back = gst_op_tensor_info_to_caps(*info);
  EXPECT_TRUE(gst_caps_is_equal(back, caps)) << gst_caps_to_string(back);
  auto again = gst_op_tensor_info_from_caps(back);
  ASSERT_TRUE(again.ok());
  EXPECT_TRUE(*again == *info);
  gst_caps_unref(back);
  gst_caps_unref(caps);

  // A single tensor may use plain strings.
  caps = gst_caps_from_string(
      "application/x-op-tensors, names=img, types=uint8, dims=(string)\"1,12,128,256\"");
  info = gst_op_tensor_info_from_caps(caps);
  ASSERT_TRUE(info.ok()) << info.status().ToString();
  EXPECT_EQ(info->tensors[0].bytes(), 12u * 128 * 256);
  gst_caps_unref(caps);
}

TEST(TensorCaps, MalformedCapsSayWhichFieldIsWrong) {
  gst_init(nullptr, nullptr);
  struct Case {
    const char *caps;
    const char *want;  // must appear in the message
  } cases[] = {
      {"application/x-op-tensors, names=a, types=uint8", "field dims is missing"},
      {"application/x-op-tensors, names=a, types=float8, dims=(string)\"1,2\"", "float8"},
      {"application/x-op-tensors, names=a, types=uint8, dims=(string)\"1,x\"", "field dims"},
      {"application/x-op-tensors, names=a, types=uint8, dims=(string)\"1,0\"", "field dims"},
      {"application/x-op-tensors, names=a, types=uint8, dims=(string)\"\"", "field dims"},
      {"application/x-op-tensors, names=(string)<a, b>, types=uint8, dims=(string)\"1\"",
       "one entry per tensor"},
      {"application/x-op-tensors, names=(string)<a, a>, types=(string)<uint8, uint8>, "
       "dims=(string)<\"1\", \"1\">",
       "appears twice"},
      {"application/x-op-tensors, names=a, types=uint8, dims=(string)\"4\", "
       "slices=(string)\"s:2:9\"",
       "field slices"},
      {"application/x-op-tensors, names=a, types=uint8, dims=(string)\"4\", slices=(string)\"s:2\"",
       "field slices"},
      {"application/x-op-tensors, names=a, types=uint8, dims=(string)\"4\", "
       "slices=(string)\"b/s:0:1\"",
       "unknown tensor \"b\""},
      {"application/x-op-tensors, names={ a, b }, types=uint8, dims=(string)\"4\"", "field names"},
      {"application/x-op-tensors, names=a, types=uint8, dims=4", "field dims"},
      {"video/x-raw, format=NV12", "not application/x-op-tensors"},
      // Found by fuzz-caps: a NULL string threw from std::string (an abort), and slices on no
      // tensors read the first tensor of an empty list.
      {"application/x-op-tensors, names=(string)NULL, types=uint8, dims=(string)\"1\"",
       "field names is a NULL string"},
      {"application/x-op-tensors, names=(string)<a, NULL>, types=(string)<uint8, uint8>, "
       "dims=(string)<\"1\", \"1\">",
       "field names: entry 1 is a NULL string"},
      {"application/x-op-tensors, names=(string)<>, types=(string)<>, dims=(string)<>, "
       "slices=(string)\"s:0:1\"",
       "field names: no tensors"},
  };
  for (const Case &c : cases) {
    GstCaps *caps = gst_caps_from_string(c.caps);
    ASSERT_NE(caps, nullptr) << c.caps;
    auto info = gst_op_tensor_info_from_caps(caps);
    EXPECT_FALSE(info.ok()) << c.caps;
    if (!info.ok()) {
      EXPECT_EQ(info.status().code(), op::StatusCode::kInvalidArgument);
      EXPECT_NE(info.status().message().find(c.want), std::string::npos)
          << c.caps << " -> " << info.status().message();
    }
    gst_caps_unref(caps);
  }
}

// ---- frame meta ----------------------------------------------------------------------------

TEST(FrameMeta, AddGetAndCopyOnTransform) {
  gst_init(nullptr, nullptr);
  GstBuffer *buf = gst_buffer_new_allocate(nullptr, 16, nullptr);
  EXPECT_EQ(gst_buffer_get_op_frame_meta(buf), nullptr);
  GstOpFrameMeta *m = gst_buffer_add_op_frame_meta(buf);
  ASSERT_NE(m, nullptr);
  EXPECT_EQ(m->road_frame_id, 0u);
  EXPECT_EQ(m->stage_ns[GST_OP_STAGE_PARSE], 0u);
  m->road_frame_id = 1234;
  m->wide_frame_id = 1233;
  m->road_sof_ns = 1000000001;
  m->road_eof_ns = 1020000001;
  m->calibration_seen = TRUE;
  m->dropped = 2;
  m->stage_ns[GST_OP_STAGE_WARP] = 1500000;
  EXPECT_EQ(gst_buffer_get_or_add_op_frame_meta(buf), m);

  GstBuffer *copy = gst_buffer_copy(buf);
  GstOpFrameMeta *c = gst_buffer_get_op_frame_meta(copy);
  ASSERT_NE(c, nullptr);
  EXPECT_NE(c, m);
  EXPECT_EQ(c->road_frame_id, 1234u);
  EXPECT_EQ(c->wide_frame_id, 1233u);
  EXPECT_EQ(c->road_eof_ns, 1020000001u);
  EXPECT_TRUE(c->calibration_seen);
  EXPECT_EQ(c->dropped, 2u);
  EXPECT_EQ(c->stage_ns[GST_OP_STAGE_WARP], 1500000u);
  const gchar *const *tags = gst_meta_api_type_get_tags(GST_OP_FRAME_META_API_TYPE);
  EXPECT_TRUE(tags == nullptr || tags[0] == nullptr)
      << "no tags, so GstBaseTransform copies the meta by default";
  gst_buffer_unref(copy);
  gst_buffer_unref(buf);
}

// The frame clock travels with the meta by reference: a copy of the buffer reads what the clock
// says when it is read, not when the buffer was copied, and the clock lives as long as a meta
// holds it.
TEST(FrameMeta, FrameClockIsSharedByReference) {
  gst_init(nullptr, nullptr);
  GstOpFrameClock *clock = gst_op_frame_clock_new();
  guint32 newest = 99;
  EXPECT_FALSE(gst_op_frame_clock_newest(clock, &newest));
  EXPECT_FALSE(gst_op_frame_clock_newest(nullptr, &newest));
  GstBuffer *buf = gst_buffer_new_allocate(nullptr, 16, nullptr);
  GstOpFrameMeta *m = gst_buffer_add_op_frame_meta(buf);
  EXPECT_EQ(m->clock, nullptr);
  gst_op_frame_clock_note(clock, 0);
  gst_op_frame_meta_set_clock(m, clock);
  GstBuffer *copy = gst_buffer_copy(buf);
  gst_buffer_unref(buf);
  gst_op_frame_clock_unref(clock);  // the copy's meta keeps it alive
  GstOpFrameMeta *c = gst_buffer_get_op_frame_meta(copy);
  ASSERT_NE(c, nullptr);
  ASSERT_EQ(c->clock, clock);
  ASSERT_TRUE(gst_op_frame_clock_newest(c->clock, &newest));
  EXPECT_EQ(newest, 0u);
  gst_op_frame_clock_note(c->clock, 41);
  gst_op_frame_clock_note(c->clock, 40);  // the latest, not the largest
  ASSERT_TRUE(gst_op_frame_clock_newest(c->clock, &newest));
  EXPECT_EQ(newest, 40u);
  gst_op_frame_meta_set_clock(c, nullptr);
  EXPECT_EQ(c->clock, nullptr);
  gst_buffer_unref(copy);
}

}  // namespace
