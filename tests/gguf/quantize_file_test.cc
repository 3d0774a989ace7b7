#include "common/test_util.h"
#include "gguf/quantize_file.h"

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <unistd.h>

#include "gguf/gguf_file.h"
#include "gguf/gguf_writer.h"
#include "tensor/fp16.h"
#include "tensor/quant_ref.h"

namespace tarmac::gguf {
namespace {

namespace fs = std::filesystem;

const std::string kModel = TARMAC_SOURCE_DIR "/models/wp-11m-f16.gguf";

class QuantizeFileTest : public testing::TempDirTest {
 protected:
  ThreadPool pool_{2};
};

std::vector<float> Dequant(const TensorInfo& t) {
  std::vector<float> out(t.num_elements());
  const int64_t row = t.dims[0], rb = RowBytes(t.type, row);
  for (int64_t r = 0; r < t.num_rows(); ++r) {
    DequantizeRowRef(t.type, t.data + r * rb, out.data() + r * row, row);
  }
  return out;
}

double RelRmse(const std::vector<float>& x, const std::vector<float>& y) {
  double e = 0, s = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    e += (double(x[i]) - y[i]) * (double(x[i]) - y[i]);
    s += double(x[i]) * x[i];
  }
  return std::sqrt(e / std::max(s, 1e-30));
}

// Relative RMSE of a whole tensor, per stored type, on trained weights (wp-11m; measured
// maxima printed by the test: q8_0 0.54%, q4_0 8.7%, q4_K 7.2%, q6_K 1.74%), with margin.
double Bound(DType t) {
  switch (t) {
    case DType::kF32: return 0.0;
    case DType::kQ8_0: return 0.008;
    case DType::kQ4_0: return 0.11;
    case DType::kQ4_K: return 0.09;
    case DType::kQ6_K: return 0.022;
    case DType::kQ5_0: return 0.055;   // q4_K's fallback
    case DType::kQ5_K: return 0.05;
    case DType::kQ5_1: return 0.055;   // q5_K's fallback
    case DType::kIQ4_XS: return 0.10;
    case DType::kIQ4_NL: return 0.10;  // iq4_xs's fallback
    default: return 0.0;
  }
}

TEST_F(QuantizeFileTest, Wp11mStaysWithinEachFormatsExpectedError) {
  auto orig = File::Open(kModel);
  ASSERT_TRUE(orig.ok()) << orig.status().ToString();
  for (DType target : {DType::kQ8_0, DType::kQ4_0, DType::kQ4_K, DType::kQ6_K, DType::kQ5_K,
                       DType::kIQ4_XS}) {
    const std::string out = Path(std::string(DTypeName(target)) + ".gguf");
    size_t callbacks = 0;
    QuantizeOptions opts;
    opts.on_tensor = [&](const TensorReport&, size_t, size_t n) {
      ++callbacks;
      EXPECT_EQ(n, orig->tensors().size());
    };
    auto sum = QuantizeFile(kModel, out, target, opts, &pool_);
    ASSERT_TRUE(sum.ok()) << sum.status().ToString();
    EXPECT_EQ(callbacks, orig->tensors().size());
    auto q = File::Open(out);
    ASSERT_TRUE(q.ok()) << q.status().ToString();
    EXPECT_EQ(sum->bytes_out, q->tensor_bytes());

    // Metadata: everything preserved, in order, except the two keys we own.
    std::vector<std::string> keys_in, keys_out;
    for (const auto& kv : orig->metadata()) {
      keys_in.push_back(kv.key);
      if (kv.key == "general.file_type") continue;
      const Value* v = q->Find(kv.key);
      ASSERT_NE(v, nullptr) << kv.key;
      EXPECT_TRUE(*v == kv.value) << kv.key;
    }
    for (const auto& kv : q->metadata()) keys_out.push_back(kv.key);
    keys_in.push_back("general.quantization_version");
    EXPECT_EQ(keys_in, keys_out);
    EXPECT_EQ(*q->GetUint("general.file_type"), *LlamaFileType(target));
    EXPECT_EQ(*q->GetUint("general.quantization_version"), 2u);

    // Tensors: same names, shapes and order; every value within the stored type's error.
    ASSERT_EQ(q->tensors().size(), orig->tensors().size());
    std::map<DType, double> worst;
    int fallbacks = 0;
    for (size_t i = 0; i < orig->tensors().size(); ++i) {
      const TensorInfo& a = orig->tensors()[i];
      const TensorInfo& b = q->tensors()[i];
      ASSERT_EQ(a.name, b.name);
      ASSERT_EQ(a.dims, b.dims);
      const DType want = PlanTensorType(target, static_cast<int>(a.dims.size()), a.dims[0], nullptr);
      EXPECT_EQ(b.type, want) << a.name;
      if (a.dims.size() >= 2 && want != target) ++fallbacks;
      const double e = RelRmse(Dequant(a), Dequant(b));
      worst[b.type] = std::max(worst[b.type], e);
      EXPECT_LE(e, Bound(b.type)) << a.name << " as " << DTypeName(b.type);
    }
    EXPECT_EQ(fallbacks, sum->fallbacks);
    for (const auto& [t, e] : worst) {
      std::printf("target %-5s: stored as %-5s worst tensor relative RMSE %.3f%%\n",
                  std::string(DTypeName(target)).c_str(), std::string(DTypeName(t)).c_str(),
                  100 * e);
    }
  }
}

// llama.cpp's fallbacks: q4_K -> q5_0 where the 256-element block does not divide a row.
TEST_F(QuantizeFileTest, KQuantsFallBackAsLlamaCppForRowsNotMultipleOf256) {
  auto sum = QuantizeFile(kModel, Path("q4k.gguf"), DType::kQ4_K, {}, &pool_);
  ASSERT_TRUE(sum.ok()) << sum.status().ToString();
  // wp-11m: dim 384 (not a multiple of 256), ffn 1024. Only ffn_down rows (1024) fit q4_K.
  for (const TensorReport& r : sum->tensors) {
    if (r.dims.size() == 1) {
      EXPECT_EQ(r.to, DType::kF32) << r.name;
    } else if (r.dims[0] == 1024) {
      EXPECT_EQ(r.to, DType::kQ4_K) << r.name;
      EXPECT_TRUE(r.note.empty());
    } else {
      EXPECT_EQ(r.to, DType::kQ5_0) << r.name;
      EXPECT_NE(r.note.find("not a multiple of 256"), std::string::npos) << r.note;
    }
  }
  EXPECT_EQ(sum->fallbacks, 6 * 6 + 2);  // 6 per layer + token_embd + output
}

TEST_F(QuantizeFileTest, OutputDoesNotDependOnThreadCount) {
  ThreadPool one(1);
  ASSERT_TRUE(QuantizeFile(kModel, Path("a.gguf"), DType::kQ6_K, {}, &one).ok());
  ASSERT_TRUE(QuantizeFile(kModel, Path("b.gguf"), DType::kQ6_K, {}, &pool_).ok());
  ASSERT_TRUE(QuantizeFile(kModel, Path("c.gguf"), DType::kQ6_K, {}, nullptr).ok());
  auto read = [](const std::string& p) {
    std::ifstream f(p, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(f), {});
  };
  const std::string a = read(Path("a.gguf"));
  EXPECT_EQ(a, read(Path("b.gguf")));
  EXPECT_EQ(a, read(Path("c.gguf")));
}

// A small file with an f16 norm, an f16 matrix with a non-.weight name, and an f32 matrix.
std::string WriteSmallModel(const std::string& path, float poison = 0.0f) {
  std::vector<uint16_t> norm(64);
  for (size_t i = 0; i < norm.size(); ++i) norm[i] = F32ToF16(1.0f + 0.01f * i);
  std::vector<uint16_t> other(64 * 2, F32ToF16(0.5f));
  std::vector<float> mat(64 * 4);
  for (size_t i = 0; i < mat.size(); ++i) mat[i] = std::sin(0.1f * i);
  mat[70] += poison;
  Writer w;
  w.SetKV("general.architecture", Value::Str("llama"));
  w.SetKV("general.file_type", Value::U32(0));
  auto bytes = [](const auto& v) {
    return std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(v.data()),
                                    v.size() * sizeof(v[0]));
  };
  EXPECT_TRUE(w.AddTensor("blk.0.attn_norm.weight", {64}, DType::kF16, bytes(norm)).ok());
  EXPECT_TRUE(w.AddTensor("rope_table", {64, 2}, DType::kF16, bytes(other)).ok());
  EXPECT_TRUE(w.AddTensor("blk.0.attn_q.weight", {64, 4}, DType::kF32, bytes(mat)).ok());
  EXPECT_TRUE(w.Write(path).ok());
  return path;
}

TEST_F(QuantizeFileTest, NormsBecomeF32AndNonWeightTensorsKeepTheirType) {
  const std::string in = WriteSmallModel(Path("small.gguf"));
  auto sum = QuantizeFile(in, Path("small-q8.gguf"), DType::kQ8_0, {}, &pool_);
  ASSERT_TRUE(sum.ok()) << sum.status().ToString();
  auto f = File::Open(Path("small-q8.gguf"));
  ASSERT_TRUE(f.ok());
  const TensorInfo* norm = f->FindTensor("blk.0.attn_norm.weight");
  ASSERT_NE(norm, nullptr);
  EXPECT_EQ(norm->type, DType::kF32);
  EXPECT_FLOAT_EQ(reinterpret_cast<const float*>(norm->data)[3], F16ToF32(F32ToF16(1.03f)));
  EXPECT_EQ(f->FindTensor("rope_table")->type, DType::kF16);
  EXPECT_EQ(f->FindTensor("blk.0.attn_q.weight")->type, DType::kQ8_0);
  EXPECT_EQ(*f->GetUint("general.file_type"), 7u);
}

TEST_F(QuantizeFileTest, BadInputsAreErrorsAndLeaveNoFile) {
  const std::string out = Path("out.gguf");
  auto missing = QuantizeFile(Path("nope.gguf"), out, DType::kQ8_0, {}, &pool_);
  EXPECT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("nope.gguf"), std::string::npos);

  auto bad_type = QuantizeFile(kModel, out, DType::kQ8_K, {}, &pool_);
  EXPECT_EQ(bad_type.status().code(), StatusCode::kInvalidArgument);

  const std::string in = WriteSmallModel(Path("small.gguf"));
  auto same = QuantizeFile(in, in, DType::kQ8_0, {}, &pool_);
  EXPECT_EQ(same.status().code(), StatusCode::kInvalidArgument);

  const std::string poisoned =
      WriteSmallModel(Path("nan.gguf"), std::numeric_limits<float>::quiet_NaN());
  auto nan = QuantizeFile(poisoned, out, DType::kQ4_0, {}, &pool_);
  ASSERT_FALSE(nan.ok());
  EXPECT_NE(nan.status().message().find("blk.0.attn_q.weight"), std::string::npos)
      << nan.status().message();
  EXPECT_NE(nan.status().message().find("row 1"), std::string::npos) << nan.status().message();
  EXPECT_NE(nan.status().message().find("element 6"), std::string::npos) << nan.status().message();

  // Nothing at `out`, and no temp file left in the directory either.
  size_t files = 0;
  for (const auto& e : fs::directory_iterator(dir_)) {
    EXPECT_EQ(e.path().string().find("out.gguf"), std::string::npos) << e.path();
    ++files;
  }
  EXPECT_EQ(files, 2u);  // small.gguf, nan.gguf
}

TEST(QuantizeFilePlanTest, PlanTensorType) {
  std::string note;
  EXPECT_EQ(PlanTensorType(DType::kQ4_K, 1, 384, &note), DType::kF32);
  EXPECT_EQ(PlanTensorType(DType::kQ4_K, 2, 512, &note), DType::kQ4_K);
  EXPECT_TRUE(note.empty());
  EXPECT_EQ(PlanTensorType(DType::kQ6_K, 2, 384, &note), DType::kQ8_0);
  EXPECT_FALSE(note.empty());
  EXPECT_EQ(PlanTensorType(DType::kQ4_K, 2, 384, &note), DType::kQ5_0);
  EXPECT_EQ(PlanTensorType(DType::kQ5_K, 2, 384, &note), DType::kQ5_1);
  for (DType t : {DType::kQ2_K, DType::kQ3_K, DType::kIQ4_XS, DType::kIQ2_XXS, DType::kIQ2_XS,
                  DType::kIQ2_S, DType::kIQ3_XXS, DType::kIQ3_S, DType::kIQ1_S, DType::kIQ1_M,
                  DType::kTQ1_0, DType::kTQ2_0}) {
    EXPECT_EQ(PlanTensorType(t, 2, 384, &note), DType::kIQ4_NL) << DTypeName(t);
    EXPECT_NE(note.find("using iq4_nl"), std::string::npos) << note;
    EXPECT_EQ(PlanTensorType(t, 2, 200, &note), DType::kF16) << DTypeName(t);
  }
  EXPECT_EQ(PlanTensorType(DType::kQ4_0, 2, 100, &note), DType::kF16);
  EXPECT_EQ(PlanTensorType(DType::kF16, 2, 100, &note), DType::kF16);
  EXPECT_TRUE(note.empty());
  EXPECT_EQ(LlamaFileType(DType::kQ8_0), 7u);
  EXPECT_EQ(LlamaFileType(DType::kQ4_0), 2u);
  EXPECT_EQ(LlamaFileType(DType::kQ4_K), 14u);
  EXPECT_EQ(LlamaFileType(DType::kQ6_K), 18u);
  EXPECT_EQ(LlamaFileType(DType::kBF16), 32u);
  EXPECT_EQ(LlamaFileType(DType::kQ5_K), 16u);
  EXPECT_EQ(LlamaFileType(DType::kIQ4_XS), 30u);
  EXPECT_EQ(LlamaFileType(DType::kMXFP4), 38u);
  EXPECT_EQ(LlamaFileType(DType::kTQ2_0), 37u);
  for (uint32_t id = 0; id < 64; ++id) {
    const auto tr = GetDTypeTraits(id);
    if (!tr || !IsComputeType(static_cast<DType>(id)) || id == uint32_t(DType::kQ8_K)) continue;
    EXPECT_TRUE(IsWeightTargetType(static_cast<DType>(id))) << tr->name;
  }
  EXPECT_FALSE(LlamaFileType(DType::kQ8_K).has_value());
}

}  // namespace
}  // namespace tarmac::gguf
