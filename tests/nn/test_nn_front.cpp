// The front half of the network runtime without a device: IR helpers, half floats, .npy,
// the restricted unpickler, ONNX import (models written by make_models.py), shape binding.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>

#include "nn/npy.h"
#include "nn/onnx_import.h"
#include "nn/pickle.h"
#include "nn/reference.h"
#include "nn/shape_inference.h"

using namespace op;
using namespace op::nn;
namespace fs = std::filesystem;

namespace {

// Folder of the models make_models.py wrote (set by meson); tests that need them skip without.
std::string Models() {
  const char *d = std::getenv("NN_TEST_MODELS");
  return d ? d : "";
}
#define NEED_MODELS()   \
  if (Models().empty()) \
  GTEST_SKIP() << "NN_TEST_MODELS not set (no venv)"

bool OneLine(const Status &s) {
  return s.message().find('\n') == std::string::npos;
}

Tensor Npy(const std::string &name) {
  auto t = ReadNpy(Models() + "/" + name);
  EXPECT_TRUE(t.ok()) << t.status().ToString();
  return t.ok() ? *t : Tensor();
}

void ExpectSameBytes(const Tensor &got, const Tensor &want) {
  EXPECT_EQ(got.dtype, want.dtype);
  EXPECT_EQ(got.shape, want.shape);
  ASSERT_TRUE(got.data && want.data);
  EXPECT_EQ(*got.data, *want.data);
}

}  // namespace

TEST(Half, EveryHalfRoundTripsThroughFloat) {
  for (uint32_t h = 0; h < 65536; ++h) {
    const float f = HalfToFloat(static_cast<uint16_t>(h));
    if (std::isnan(f)) {
      EXPECT_TRUE(std::isnan(HalfToFloat(FloatToHalf(f))));
      continue;
    }
    ASSERT_EQ(FloatToHalf(f), h) << "half 0x" << std::hex << h;
  }
}

TEST(Half, RoundsToNearestEven) {
  EXPECT_EQ(HalfToFloat(0x3c00), 1.0f);
  EXPECT_EQ(HalfToFloat(0x7bff), 65504.0f);
  EXPECT_EQ(FloatToHalf(65520.0f), 0x7c00);  // halfway to 2^16 rounds to inf
  EXPECT_EQ(FloatToHalf(65519.0f), 0x7bff);
  EXPECT_EQ(FloatToHalf(1.0f + 1.0f / 2048), 0x3c00);     // tie → even (1.0)
  EXPECT_EQ(FloatToHalf(1.0f + 3.0f / 2048), 0x3c02);     // tie → even (up)
  EXPECT_EQ(FloatToHalf(std::ldexp(1.0f, -25)), 0x0000);  // half the smallest subnormal: even
  EXPECT_EQ(FloatToHalf(std::ldexp(3.0f, -25)), 0x0002);
}

TEST(Shape, BroadcastAndErrors) {
  auto s = BroadcastShapes(Shape{3, 1, 5}, Shape{4, 1});
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(*s, (Shape{3, 4, 5}));
  auto bad = BroadcastShapes(Shape{3, 2}, Shape{4});
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("(3,2)"), std::string::npos);
}

TEST(ShapeBinding, ParsesAndRefusesMalformedOptions) {
  ShapeBindings b;
  ASSERT_TRUE(ParseShapeBinding("img=1,12,128,256", &b).ok());
  EXPECT_EQ(b["img"], (Shape{1, 12, 128, 256}));
  for (const char *bad : {"img", "=1,2", "img=1,,2", "img=1,x", "img=-1"}) {
    Status st = ParseShapeBinding(bad, &b);
    EXPECT_FALSE(st.ok()) << bad;
    EXPECT_NE(st.message().find(bad), std::string::npos) << st.message();
  }
}

TEST(Npy, RoundTripsEveryDtype) {
  const fs::path dir = fs::temp_directory_path() / ("nn_npy_" + std::to_string(getpid()));
  fs::create_directories(dir);
  for (DType t : {DType::kUInt8, DType::kInt64, DType::kFloat16, DType::kFloat32, DType::kBool,
                  DType::kInt32, DType::kInt8, DType::kFloat64}) {
    Tensor v;
    v.dtype = t;
    v.shape = Shape{2, 3};
    Bytes b(v.ByteSize());
    for (size_t i = 0; i < b.size(); ++i)
      b[i] = static_cast<uint8_t>(i * 7 + 1);
    if (t == DType::kBool)
      for (auto &x : b)
        x &= 1;
    v.data = std::make_shared<const Bytes>(b);
    const std::string path = (dir / (std::string(DTypeName(t)) + ".npy")).string();
    ASSERT_TRUE(WriteNpy(path, v).ok());
    auto back = ReadNpy(path);
    ASSERT_TRUE(back.ok()) << back.status().ToString();
    ExpectSameBytes(*back, v);
  }
  // A scalar and a vector keep their rank.
  Tensor s = MakeFloatConstant({2.5f}, Shape{});
  auto sb = ParseNpy(SerializeNpy(s), "scalar");
  ASSERT_TRUE(sb.ok());
  EXPECT_EQ(sb->shape.rank(), 0u);
  fs::remove_all(dir);
}

TEST(Npy, RefusesTruncatedAndForeignFiles) {
  Tensor v = MakeFloatConstant({1, 2, 3, 4}, Shape{4});
  std::string bytes = SerializeNpy(v);
  auto cut = ParseNpy(bytes.substr(0, bytes.size() - 3), "cut.npy");
  ASSERT_FALSE(cut.ok());
  EXPECT_NE(cut.status().message().find("cut.npy"), std::string::npos);
  EXPECT_FALSE(ParseNpy("not a numpy file", "x.npy").ok());
  std::string big_endian = bytes;
  big_endian.replace(big_endian.find("<f4"), 3, ">f4");
  auto be = ParseNpy(big_endian, "be.npy");
  ASSERT_FALSE(be.ok());
  EXPECT_NE(be.status().message().find(">f4"), std::string::npos);
  std::string fortran = bytes;
  fortran.replace(fortran.find("False"), 5, "True ");
  EXPECT_FALSE(ParseNpy(fortran, "f.npy").ok());
}

// Pickles made by Python 3's pickle.dumps({'pose': slice(0, 12, None), 'lead': slice(12, 30,
// None)}, protocol=N) for N = 2 and 4.
TEST(Pickle, DecodesSliceDictsOfProtocols2And4) {
  const std::string p2(
      "\x80\x02\x7d\x71\x00\x28\x58\x04\x00\x00\x00\x70\x6f\x73\x65\x71\x01\x63\x5f\x5f\x62\x75"
      "\x69\x6c\x74\x69\x6e\x5f\x5f\x0a\x73\x6c\x69\x63\x65\x0a\x71\x02\x4b\x00\x4b\x0c\x4e\x87"
      "\x71\x03\x52\x71\x04\x58\x04\x00\x00\x00\x6c\x65\x61\x64\x71\x05\x68\x02\x4b\x0c\x4b\x1e"
      "\x4e\x87\x71\x06\x52\x71\x07\x75\x2e",
      75);
  const std::string p4(
      "\x80\x04\x95\x3c\x00\x00\x00\x00\x00\x00\x00\x7d\x94\x28\x8c\x04\x70\x6f\x73\x65\x94\x8c"
      "\x08\x62\x75\x69\x6c\x74\x69\x6e\x73\x94\x8c\x05\x73\x6c\x69\x63\x65\x94\x93\x94\x4b\x00"
      "\x4b\x0c\x4e\x87\x94\x52\x94\x8c\x04\x6c\x65\x61\x64\x94\x68\x04\x4b\x0c\x4b\x1e\x4e\x87"
      "\x94\x52\x94\x75\x2e",
      71);
  for (const std::string &p : {p2, p4}) {
    auto s = UnpickleSlices(p);
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    ASSERT_EQ(s->size(), 2u);
    EXPECT_EQ((*s)[0].name, "pose");
    EXPECT_EQ((*s)[0].start, 0);
    EXPECT_EQ((*s)[0].end, 12);
    EXPECT_EQ((*s)[1].name, "lead");
    EXPECT_EQ((*s)[1].end, 30);
  }
}

TEST(Pickle, RandomBytesNeverCrash) {
  std::mt19937 rng(99);
  int decoded = 0;
  for (int iter = 0; iter < 20000; ++iter) {
    std::string p(1 + rng() % 64, '\0');
    // Bias towards real opcodes so the machine gets past the first byte.
    const char ops[] = "\x80\x95}()NKMJ\x8a\x8cX\x8d\x94qrhj\x85\x86\x87tsuc\x93R.";
    for (char &c : p)
      c = rng() % 2 ? ops[rng() % (sizeof ops - 1)] : static_cast<char>(rng());
    auto s = UnpickleSlices(p);
    decoded += s.ok();
  }
  SUCCEED() << decoded << " random pickles decoded";
}

TEST(Pickle, RefusesForbiddenOpcodesByName) {
  // GLOBAL os.system + REDUCE: code execution in a real unpickler.
  auto g =
      UnpickleSlices(std::string("\x80\x02"
                                 "cos\nsystem\nX\x02\x00\x00\x00id\x85R.",
                                 23));
  ASSERT_FALSE(g.ok());
  EXPECT_NE(g.status().message().find("GLOBAL os.system"), std::string::npos)
      << g.status().message();
  auto b = UnpickleSlices(std::string("\x80\x02}b.", 5));
  ASSERT_FALSE(b.ok());
  EXPECT_NE(b.status().message().find("BUILD"), std::string::npos) << b.status().message();
  auto t = UnpickleSlices(std::string("\x80\x02}X\x04\x00\x00\x00po", 11));
  ASSERT_FALSE(t.ok());
  EXPECT_NE(t.status().message().find("truncated"), std::string::npos);
  EXPECT_FALSE(DecodeBase64("a$b").ok());
}

TEST(Import, TinyModelRunsAndKeepsItsSlices) {
  NEED_MODELS();
  auto g = ImportOnnxFile(Models() + "/tiny.onnx");
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  ASSERT_EQ(g->slices.size(), 3u);
  EXPECT_EQ(g->slices[1].name, "lead");
  EXPECT_EQ(g->slices[1].start, 12);
  EXPECT_EQ(g->slices[1].end, 30);
  // The batch dim is symbolic: without a binding, shape inference names it.
  Graph unbound = *g;
  Status st = InferShapes(unbound);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("batch"), std::string::npos) << st.message();
  EXPECT_TRUE(OneLine(st));
  ShapeBindings b;
  ASSERT_TRUE(ParseShapeBinding("x=2,3,5,5", &b).ok());
  ASSERT_TRUE(InferShapes(*g, b).ok());
  EXPECT_EQ(g->tensor(g->outputs[0]).shape, (Shape{2, 3, 5, 5}));
  Tensor x = Npy("tiny_x.npy");
  x.name = "x";
  auto out = RunReference(*g, {x});
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  Tensor want = Npy("tiny_y.npy");
  ASSERT_EQ((*out)[0].shape, want.shape);
  const float *a = (*out)[0].Data<float>(), *e = want.Data<float>();
  for (int64_t i = 0; i < want.shape.NumElements(); ++i)
    EXPECT_NEAR(a[i], e[i], 1e-5 * (1 + std::fabs(e[i]))) << i;  // float32 sums of 27 products
}

TEST(Import, ASymbolicDimBoundOnceBindsEveryInputNamingIt) {
  NEED_MODELS();
  auto g = ImportOnnxFile(Models() + "/two_inputs.onnx");
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  Graph only_a = *g;
  ShapeBindings b;
  ASSERT_TRUE(ParseShapeBinding("a=2,3", &b).ok());
  // b is (batch, n): batch comes from a, n stays unknown and is named in the error.
  Status st = InferShapes(only_a, b);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("input 'b' has shape (2,?)"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("n"), std::string::npos);
  ASSERT_TRUE(ParseShapeBinding("b=2,3", &b).ok());
  ASSERT_TRUE(InferShapes(*g, b).ok());
  EXPECT_EQ(g->tensor(g->outputs[0]).shape, (Shape{2, 3}));
  ShapeBindings wrong;
  ASSERT_TRUE(ParseShapeBinding("nope=1", &wrong).ok());
  Graph w = *g;
  Status ws = InferShapes(w, wrong);
  ASSERT_FALSE(ws.ok());
  EXPECT_NE(ws.message().find("'nope'"), std::string::npos);
}

TEST(Import, TypedFieldsAndRawDataGiveTheSameValues) {
  NEED_MODELS();
  auto g = ImportOnnxFile(Models() + "/typed.onnx");
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  ASSERT_TRUE(InferShapes(*g).ok());
  auto out = RunReference(*g, {});
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  const char *names[] = {"f32", "f16", "i64", "u8", "b"};
  ASSERT_EQ(out->size(), 6u);
  for (size_t i = 0; i < 5; ++i)
    ExpectSameBytes((*out)[i], Npy(std::string("typed_") + names[i] + ".npy"));
  ExpectSameBytes((*out)[5], Npy("typed_f16.npy"));  // the Constant node's raw_data
}

TEST(Import, ExternalDataInsideTheFolderIsRead) {
  NEED_MODELS();
  auto g = ImportOnnxFile(Models() + "/external/model.onnx");
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  ExpectSameBytes(g->tensor(g->FindTensor("w")), Npy("external_w.npy"));
}

// Issue 4's error cases: each a one-line error that names the problem.
TEST(ImportErrors, TruncatedFile) {
  NEED_MODELS();
  auto g = ImportOnnxFile(Models() + "/truncated.onnx");
  ASSERT_FALSE(g.ok());
  EXPECT_EQ(g.status().code(), StatusCode::kCorrupt);
  EXPECT_NE(g.status().message().find("truncated.onnx"), std::string::npos);
  EXPECT_NE(g.status().message().find("truncated or not an ONNX model"), std::string::npos);
  EXPECT_TRUE(OneLine(g.status()));
}

TEST(ImportErrors, UnsupportedOpNamesOpNodeAndOpset) {
  NEED_MODELS();
  auto g = ImportOnnxFile(Models() + "/unsupported.onnx");
  ASSERT_FALSE(g.ok());
  EXPECT_EQ(g.status().code(), StatusCode::kUnsupported);
  const std::string &m = g.status().message();
  EXPECT_NE(m.find("unsupported op Det"), std::string::npos) << m;
  EXPECT_NE(m.find("det_node"), std::string::npos) << m;
  EXPECT_NE(m.find("opset 13"), std::string::npos) << m;
  EXPECT_TRUE(OneLine(g.status()));
}

// An attribute the op's ONNX schema does not name is refused (onnxruntime refuses it too), with
// the node, the attribute and the opset named.
TEST(ImportErrors, AnAttributeTheOpDoesNotHaveIsRefused) {
  NEED_MODELS();
  auto g = ImportOnnxFile(Models() + "/unknown_attribute.onnx");
  ASSERT_FALSE(g.ok());
  EXPECT_EQ(g.status().code(), StatusCode::kInvalidArgument);
  const std::string &m = g.status().message();
  EXPECT_NE(m.find("odd_relu"), std::string::npos) << m;
  EXPECT_NE(m.find("attribute 'slope'"), std::string::npos) << m;
  EXPECT_NE(m.find("opset 13"), std::string::npos) << m;
  EXPECT_TRUE(OneLine(g.status()));
}

TEST(ImportErrors, ExternalDataOutsideTheFolder) {
  NEED_MODELS();
  auto g = ImportOnnxFile(Models() + "/external_bad/model.onnx");
  ASSERT_FALSE(g.ok());
  const std::string &m = g.status().message();
  EXPECT_NE(m.find("../external/weights.bin"), std::string::npos) << m;
  EXPECT_NE(m.find("leaves the model's folder"), std::string::npos) << m;
  EXPECT_TRUE(OneLine(g.status()));
}

TEST(ImportErrors, ForbiddenPickleOpcodes) {
  NEED_MODELS();
  auto g = ImportOnnxFile(Models() + "/pickle_global.onnx");
  ASSERT_FALSE(g.ok());
  EXPECT_NE(g.status().message().find("output_slices"), std::string::npos) << g.status().message();
  EXPECT_NE(g.status().message().find("GLOBAL os.system"), std::string::npos)
      << g.status().message();
  EXPECT_TRUE(OneLine(g.status()));
  auto b = ImportOnnxFile(Models() + "/pickle_build.onnx");
  ASSERT_FALSE(b.ok());
  EXPECT_NE(b.status().message().find("forbidden opcode BUILD"), std::string::npos)
      << b.status().message();
  EXPECT_TRUE(OneLine(b.status()));
}

TEST(ImportErrors, MissingFileAndGarbage) {
  auto g = ImportOnnxFile("/nonexistent/model.onnx");
  ASSERT_FALSE(g.ok());
  EXPECT_EQ(g.status().code(), StatusCode::kNotFound);
  ImportOptions opt;
  auto junk = ImportOnnxBytes(std::string("\xff\xff\xff\xff garbage", 12), opt);
  ASSERT_FALSE(junk.ok());
  EXPECT_EQ(junk.status().code(), StatusCode::kCorrupt);
}

// Corrupted models (bytes changed or cut at random) never crash import, shape inference or the
// interpreter: every outcome is a value or a Status.
TEST(ImportErrors, CorruptedModelsNeverCrash) {
  NEED_MODELS();
  std::ifstream f(Models() + "/tiny.onnx", std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  const std::string good = ss.str();
  ASSERT_GT(good.size(), 100u);
  Tensor x = Npy("tiny_x.npy");
  x.name = "x";
  std::mt19937 rng(1234);
  int imported = 0, ran = 0;
  for (int iter = 0; iter < 3000; ++iter) {
    std::string bad = good;
    if (iter % 3 == 0) {
      bad.resize(rng() % bad.size());
    } else {
      for (int k = 0; k < 1 + iter % 4; ++k)
        bad[rng() % bad.size()] = static_cast<char>(rng());
    }
    ImportOptions opt;
    auto g = ImportOnnxBytes(bad, opt);
    if (!g.ok()) {
      EXPECT_TRUE(OneLine(g.status())) << g.status().message();
      continue;
    }
    ++imported;
    ShapeBindings b;
    b["x"] = Shape{2, 3, 5, 5};
    if (!InferShapes(*g, b).ok())
      continue;
    if (RunReference(*g, {x}).ok())
      ++ran;
  }
  // Most single-byte changes hit weight bytes and still import; the point is that none crashed.
  EXPECT_GT(imported, 0);
  std::printf("corrupted models: %d imported, %d ran\n", imported, ran);
}
