// Builds small graphs for device tests, and runs them on the device and on the reference
// interpreter (the oracle) to compare.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "cl/device.h"
#include "cl/queue.h"
#include "nn/codegen.h"
#include "nn/executor.h"
#include "nn/graph.h"
#include "nn/reference.h"
#include "nn/shape_inference.h"

namespace op::nn::testing {

// Deterministic pseudo-random floats in [lo, hi).
class Rng {
 public:
  explicit Rng(uint64_t seed) : s_(seed * 6364136223846793005ull + 1442695040888963407ull) {}
  float Uniform(float lo, float hi) {
    s_ = s_ * 6364136223846793005ull + 1442695040888963407ull;
    return lo + (hi - lo) * static_cast<float>((s_ >> 40) & 0xffffff) / 16777216.0f;
  }

 private:
  uint64_t s_;
};

class Builder {
 public:
  Graph g;
  std::vector<Tensor> feeds;  // values of the inputs
  Rng rng{7};

  TensorId Input(const std::string &name, Shape shape, float lo = -2.f, float hi = 2.f) {
    Tensor t;
    t.name = name;
    t.dtype = DType::kFloat32;
    t.shape = shape;
    t.is_input = true;
    TensorId id = g.AddTensor(t);
    g.inputs.push_back(id);
    std::vector<float> v(static_cast<size_t>(shape.NumElements()));
    for (float &x : v)
      x = rng.Uniform(lo, hi);
    Tensor feed = MakeFloatConstant(v, shape);
    feed.name = name;
    feeds.push_back(feed);
    return id;
  }
  TensorId InputTyped(const std::string &name, DType dtype, Shape shape, Bytes bytes) {
    Tensor t;
    t.name = name;
    t.dtype = dtype;
    t.shape = shape;
    t.is_input = true;
    TensorId id = g.AddTensor(t);
    g.inputs.push_back(id);
    Tensor feed = MakeConstant(dtype, shape, std::move(bytes));
    feed.name = name;
    feeds.push_back(feed);
    return id;
  }
  TensorId Const(Tensor t) {
    t.name = g.UniqueName("const");
    return g.AddTensor(std::move(t));
  }
  TensorId Weights(Shape shape, float lo = -1.f, float hi = 1.f) {
    std::vector<float> v(static_cast<size_t>(shape.NumElements()));
    for (float &x : v)
      x = rng.Uniform(lo, hi);
    return Const(MakeFloatConstant(v, shape));
  }
  TensorId Ints(const std::vector<int64_t> &v) {
    return Const(MakeInt64Constant(v, Shape({static_cast<int64_t>(v.size())})));
  }
  // Adds a node with `outputs` new tensors; returns the first.
  TensorId Add(OpKind op, std::vector<TensorId> inputs, Attributes attrs = {}, int outputs = 1,
               int opset = 17) {
    Node n;
    n.op = op;
    n.name = std::string(OpName(op)) + "_" + std::to_string(g.nodes.size());
    n.inputs = std::move(inputs);
    n.attrs = std::move(attrs);
    n.opset = opset;
    for (int i = 0; i < outputs; i++) {
      Tensor t;
      t.name = g.UniqueName(n.name + "_out");
      n.outputs.push_back(g.AddTensor(t));
    }
    TensorId first = n.outputs[0];
    g.nodes.push_back(std::move(n));
    return first;
  }
  void Output(TensorId t) {
    g.tensor(t).is_output = true;
    g.outputs.push_back(t);
  }
};

struct Device {
  std::shared_ptr<cl::Device> device;
  cl::Queue queue;
};

inline Device &TestDevice() {
  static Device d = [] {
    Device r;
    auto dev = cl::Device::Open("auto");
    if (dev.ok()) {
      r.device = *dev;
      auto q = cl::Queue::Create(*r.device);
      if (q.ok())
        r.queue = std::move(*q);
    }
    return r;
  }();
  return d;
}

inline float ToFloat(const Tensor &t, size_t i) {
  switch (t.dtype) {
    case DType::kFloat32:
      return t.Data<float>()[i];
    case DType::kFloat16:
      return HalfToFloat(t.Data<uint16_t>()[i]);
    case DType::kInt64:
      return static_cast<float>(t.Data<int64_t>()[i]);
    case DType::kInt32:
      return static_cast<float>(t.Data<int32_t>()[i]);
    case DType::kUInt8:
    case DType::kBool:
      return t.Data<uint8_t>()[i];
    case DType::kInt8:
      return t.Data<int8_t>()[i];
    default:
      return NAN;
  }
}

// Compiles `b.g` (shape-inferred here) for the test device and compares every output with the
// reference interpreter: |device - ref| <= tol * max(1, |ref|) elementwise (integer and bool
// outputs exactly).
// Runs `b` on the device at `precision` and compares each output with the reference
// interpreter's run of `b` or, with `twin` (fp32 only), of a graph that states the expected
// arithmetic another way. `options`: code generated for another profile than the device's (a
// GPU profile's kernels run on PoCL too).
inline void ExpectMatchesReference(Builder &b, Precision precision, float tol,
                                   const std::string &what, Builder *twin = nullptr,
                                   const CodegenOptions *options = nullptr) {
  Device &dev = TestDevice();
  ASSERT_TRUE(dev.device) << "no device";
  ASSERT_TRUE(InferShapes(b.g).ok()) << what;
  if (precision == Precision::kFp16) {
    // Route float inputs and outputs through intermediates (x + 0), so that the op under test
    // reads and writes half storage rather than the float32 I/O buffers.
    TensorId zero = b.Const(MakeFloatConstant({0.f}, Shape({})));
    Graph &g = b.g;
    std::vector<Node> wrapped;
    for (TensorId in : std::vector<TensorId>(g.inputs)) {
      if (g.tensor(in).dtype != DType::kFloat32)
        continue;
      Tensor mid;
      mid.name = g.UniqueName(g.tensor(in).name + "_h");
      TensorId m = g.AddTensor(mid);
      for (Node &n : g.nodes)
        for (TensorId &t : n.inputs)
          if (t == in)
            t = m;
      Node add;
      add.op = OpKind::kAdd;
      add.name = "wrap_" + g.tensor(in).name;
      add.inputs = {in, zero};
      add.outputs = {m};
      add.opset = 17;
      wrapped.push_back(add);
    }
    g.nodes.insert(g.nodes.begin(), wrapped.begin(), wrapped.end());
    for (TensorId &out : g.outputs) {
      if (g.tensor(out).dtype != DType::kFloat32)
        continue;
      Tensor o;
      o.name = g.UniqueName(g.tensor(out).name + "_h");
      o.is_output = true;
      g.tensor(out).is_output = false;
      TensorId fresh = g.AddTensor(o);
      Node n;
      n.name = "unwrap";
      n.inputs = {out, zero};
      n.outputs = {fresh};
      n.op = OpKind::kAdd;
      n.opset = 17;
      g.nodes.push_back(n);
      out = fresh;
    }
  }
  Status st = InferShapes(b.g);
  ASSERT_TRUE(st.ok()) << what << ": " << st.ToString();
  if (twin) {
    ASSERT_TRUE(InferShapes(twin->g).ok()) << what << ": twin";
  }
  auto ref = twin ? RunReference(twin->g, twin->feeds) : RunReference(b.g, b.feeds);
  ASSERT_TRUE(ref.ok()) << what << ": reference: " << ref.status().ToString();
  CodegenOptions opt = options ? *options : OptionsForDevice(dev.device->caps(), precision);
  auto model = GenerateCode(b.g, opt);
  ASSERT_TRUE(model.ok()) << what << ": codegen: " << model.status().ToString();
  if (precision == Precision::kFp16) {
    bool half = false;
    for (const std::string &src : model->sources)
      half = half || src.find("f16") != std::string::npos;
    EXPECT_TRUE(half) << what << ": no kernel uses half storage";
  }
  auto exec = Executor::Create(dev.device, std::move(*model));
  ASSERT_TRUE(exec.ok()) << what << ": load: " << exec.status().ToString();
  auto out = (*exec)->RunHost(dev.queue, b.feeds);
  ASSERT_TRUE(out.ok()) << what << ": run: " << out.status().ToString();
  ASSERT_EQ(out->size(), ref->size());
  for (size_t o = 0; o < ref->size(); o++) {
    const Tensor &r = (*ref)[o], &d = (*out)[o];
    ASSERT_EQ(d.dtype, r.dtype) << what;
    ASSERT_EQ(d.shape, r.shape) << what;
    bool exact = !IsFloat(r.dtype);
    size_t n = static_cast<size_t>(r.shape.NumElements());
    int bad = 0;
    for (size_t i = 0; i < n && bad < 5; i++) {
      float rv = ToFloat(r, i), dv = ToFloat(d, i);
      bool ok;
      if (exact)
        ok = rv == dv;
      else if (std::isnan(rv))
        ok = std::isnan(dv);
      else if (std::isinf(rv))
        ok = dv == rv;
      else
        ok = std::fabs(dv - rv) <= tol * std::max(1.0f, std::fabs(rv));
      if (!ok) {
        bad++;
        ADD_FAILURE() << what << " (" << PrecisionName(precision) << ") output " << o << " element "
                      << i << " of " << n << ": device " << dv << ", reference " << rv;
      }
    }
  }
}

}  // namespace op::nn::testing
