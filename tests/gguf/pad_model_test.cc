#include "gguf/pad_model.h"

#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "common/test_util.h"
#include "gguf/gguf_file.h"
#include "gguf/gguf_writer.h"
#include "gguf/make_random.h"
#include "gguf/model_presets.h"
#include "tensor/quant_ref.h"

namespace tarmac::gguf {
namespace {

namespace fs = std::filesystem;

constexpr int64_t kDim = 64, kLayers = 2, kFfn = 128;

class PadModelTest : public testing::TempDirTest {
 protected:
  // A small random llama model of `type` (f16 weights or q8_0, f32 norms).
  std::string MakeModel(DType type, const std::string& name = "in.gguf") {
    auto shape = ParseShape("dim=64,layers=2,heads=4,kv_heads=2,ffn=128,vocab=300,ctx=256");
    EXPECT_TRUE(shape.ok());
    const std::string p = Path(name);
    auto sum = MakeRandomModel(*shape, type, p, {}, &pool_);
    EXPECT_TRUE(sum.ok()) << sum.status().ToString();
    return p;
  }
  // Files in the test directory other than `keep`.
  std::vector<std::string> OtherFiles(const std::vector<std::string>& keep) {
    std::vector<std::string> out;
    for (const auto& e : fs::directory_iterator(dir_)) {
      if (std::find(keep.begin(), keep.end(), e.path().string()) == keep.end()) {
        out.push_back(e.path().filename().string());
      }
    }
    return out;
  }
  ThreadPool pool_{2};
};

bool AllZero(const uint8_t* p, size_t n) {
  return std::all_of(p, p + n, [](uint8_t b) { return b == 0; });
}

std::vector<uint8_t> Bytes(const TensorInfo& t) { return {t.data, t.data + t.nbytes}; }

TEST_F(PadModelTest, F16LayoutMetadataAndTensorContents) {
  const std::string in = MakeModel(DType::kF16);
  const std::string out = Path("out.gguf");
  PadOptions opts;
  opts.extra_layers = 3;
  opts.ffn = 256;
  size_t callbacks = 0;
  opts.on_tensor = [&](const std::string&, DType, size_t i, size_t n) {
    EXPECT_EQ(i, callbacks);
    EXPECT_LT(i, n);
    ++callbacks;
  };
  auto sum = PadModel(in, out, opts);
  ASSERT_TRUE(sum.ok()) << sum.status().ToString();
  auto a = File::Open(in);
  auto b = File::Open(out);
  ASSERT_TRUE(a.ok() && b.ok());

  EXPECT_EQ(sum->layers_in, kLayers);
  EXPECT_EQ(sum->layers_out, kLayers + 3);
  EXPECT_EQ(sum->ffn_in, kFfn);
  EXPECT_EQ(sum->ffn_out, 256);
  EXPECT_EQ(sum->parameters_in, a->parameter_count());
  EXPECT_EQ(sum->parameters_out, b->parameter_count());
  EXPECT_EQ(sum->tensor_bytes_out, b->tensor_bytes());
  EXPECT_EQ(sum->tensors_out, a->tensors().size() + 3 * 9);
  EXPECT_EQ(b->tensors().size(), sum->tensors_out);
  EXPECT_EQ(callbacks, sum->tensors_out);

  // Metadata: same keys in the same order; only block count, FFN width and name change.
  ASSERT_EQ(a->metadata().size(), b->metadata().size());
  for (size_t i = 0; i < a->metadata().size(); ++i) {
    const auto& ka = a->metadata()[i];
    const auto& kb = b->metadata()[i];
    ASSERT_EQ(ka.key, kb.key);
    if (ka.key == "llama.block_count" || ka.key == "llama.feed_forward_length" ||
        ka.key == "general.name") {
      continue;
    }
    EXPECT_EQ(ka.value.ToString(1u << 20), kb.value.ToString(1u << 20)) << ka.key;
  }
  EXPECT_EQ(*b->GetUint("llama.block_count"), 5u);
  EXPECT_EQ(*b->GetUint("llama.feed_forward_length"), 256u);
  EXPECT_NE(b->GetString("general.name")->find("padded: +3 zero-output blocks, ffn 256"),
            std::string::npos);

  // Tensors outside the blocks are unchanged.
  for (const char* name : {"token_embd.weight", "output_norm.weight", "output.weight"}) {
    const TensorInfo* ta = a->FindTensor(name);
    const TensorInfo* tb = b->FindTensor(name);
    ASSERT_TRUE(ta && tb) << name;
    EXPECT_EQ(ta->type, tb->type);
    EXPECT_EQ(ta->dims, tb->dims);
    EXPECT_EQ(Bytes(*ta), Bytes(*tb)) << name;
  }
  // Original blocks: same weights; FFN widened with zero rows (gate/up) and columns (down).
  for (int l = 0; l < kLayers; ++l) {
    const std::string p = "blk." + std::to_string(l) + ".";
    for (const char* s : {"attn_norm.weight", "attn_q.weight", "attn_k.weight", "attn_v.weight",
                          "attn_output.weight", "ffn_norm.weight"}) {
      EXPECT_EQ(Bytes(*a->FindTensor(p + s)), Bytes(*b->FindTensor(p + s))) << p + s;
    }
    for (const char* s : {"ffn_gate.weight", "ffn_up.weight"}) {
      const TensorInfo& ta = *a->FindTensor(p + s);
      const TensorInfo& tb = *b->FindTensor(p + s);
      EXPECT_EQ(tb.dims, (std::vector<int64_t>{kDim, 256}));
      EXPECT_EQ(tb.type, DType::kF16);
      EXPECT_TRUE(std::equal(ta.data, ta.data + ta.nbytes, tb.data)) << p + s;
      EXPECT_TRUE(AllZero(tb.data + ta.nbytes, tb.nbytes - ta.nbytes)) << p + s;
    }
    const TensorInfo& da = *a->FindTensor(p + "ffn_down.weight");
    const TensorInfo& db = *b->FindTensor(p + "ffn_down.weight");
    EXPECT_EQ(db.dims, (std::vector<int64_t>{256, kDim}));
    for (int64_t r = 0; r < kDim; ++r) {
      const uint8_t* ra = da.data + r * kFfn * 2;
      const uint8_t* rb = db.data + r * 256 * 2;
      EXPECT_TRUE(std::equal(ra, ra + kFfn * 2, rb)) << "row " << r;
      EXPECT_TRUE(AllZero(rb + kFfn * 2, (256 - kFfn) * 2)) << "row " << r;
    }
  }
  // Appended blocks copy block j % 2, with zero output projections and tiled gate/up rows.
  for (int j = 0; j < 3; ++j) {
    const std::string src = "blk." + std::to_string(j % kLayers) + ".";
    const std::string dst = "blk." + std::to_string(kLayers + j) + ".";
    for (const char* s : {"attn_norm.weight", "attn_q.weight", "attn_k.weight", "attn_v.weight",
                          "ffn_norm.weight"}) {
      EXPECT_EQ(Bytes(*a->FindTensor(src + s)), Bytes(*b->FindTensor(dst + s))) << dst + s;
    }
    const TensorInfo& wo = *b->FindTensor(dst + "attn_output.weight");
    EXPECT_EQ(wo.dims, a->FindTensor(src + "attn_output.weight")->dims);
    EXPECT_TRUE(AllZero(wo.data, wo.nbytes));
    const TensorInfo& down = *b->FindTensor(dst + "ffn_down.weight");
    EXPECT_EQ(down.dims, (std::vector<int64_t>{256, kDim}));
    EXPECT_TRUE(AllZero(down.data, down.nbytes));
    for (const char* s : {"ffn_gate.weight", "ffn_up.weight"}) {
      const TensorInfo& ta = *a->FindTensor(src + s);
      const TensorInfo& tb = *b->FindTensor(dst + s);
      EXPECT_EQ(tb.dims, (std::vector<int64_t>{kDim, 256}));
      const int64_t row = kDim * 2;
      for (int64_t r = 0; r < 256; ++r) {
        const uint8_t* want = ta.data + (r % kFfn) * row;
        EXPECT_TRUE(std::equal(want, want + row, tb.data + r * row)) << dst + s << " row " << r;
      }
    }
  }
  // Appended blocks come right after the last original block tensor, before output_norm.
  const auto& ts = b->tensors();
  auto pos = [&](const std::string& n) {
    return std::find_if(ts.begin(), ts.end(), [&](const TensorInfo& t) { return t.name == n; }) -
           ts.begin();
  };
  EXPECT_LT(pos("blk.1.ffn_down.weight"), pos("blk.2.attn_norm.weight"));
  EXPECT_LT(pos("blk.4.ffn_down.weight"), pos("output_norm.weight"));
}

TEST_F(PadModelTest, Q8_0FfnDownPaddedInWholeZeroBlocks) {
  const std::string in = MakeModel(DType::kQ8_0);
  const std::string out = Path("out.gguf");
  PadOptions opts;
  opts.extra_layers = 1;
  opts.ffn = 192;  // 128 + 2 blocks of 32
  ASSERT_TRUE(PadModel(in, out, opts).ok());
  auto a = File::Open(in);
  auto b = File::Open(out);
  ASSERT_TRUE(a.ok() && b.ok());
  const TensorInfo& da = *a->FindTensor("blk.1.ffn_down.weight");
  const TensorInfo& db = *b->FindTensor("blk.1.ffn_down.weight");
  ASSERT_EQ(da.type, DType::kQ8_0);
  ASSERT_EQ(db.type, DType::kQ8_0);
  std::vector<float> ra(kFfn), rb(192);
  for (int64_t r = 0; r < kDim; ++r) {
    DequantizeRowRef(DType::kQ8_0, da.data + r * RowBytes(DType::kQ8_0, kFfn), ra.data(), kFfn);
    DequantizeRowRef(DType::kQ8_0, db.data + r * RowBytes(DType::kQ8_0, 192), rb.data(), 192);
    EXPECT_TRUE(std::equal(ra.begin(), ra.end(), rb.begin())) << "row " << r;
    EXPECT_TRUE(std::all_of(rb.begin() + kFfn, rb.end(), [](float v) { return v == 0.0f; }));
  }
  // Appended block: zero output projections decode to 0.
  const TensorInfo& down = *b->FindTensor("blk.2.ffn_down.weight");
  EXPECT_TRUE(AllZero(down.data, down.nbytes));

  // An FFN width that splits a q8_0 block is rejected, naming the tensor and the block size.
  opts.ffn = 200;
  auto bad = PadModel(in, Path("bad.gguf"), opts);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("not a multiple of 32"), std::string::npos)
      << bad.status().message();
  EXPECT_NE(bad.status().message().find("ffn_down"), std::string::npos);
  EXPECT_FALSE(fs::exists(Path("bad.gguf")));
}

TEST_F(PadModelTest, NothingToPadIsAnExactCopyOfTheTensors) {
  const std::string in = MakeModel(DType::kF16);
  const std::string out = Path("out.gguf");
  auto sum = PadModel(in, out, {});
  ASSERT_TRUE(sum.ok()) << sum.status().ToString();
  auto a = File::Open(in);
  auto b = File::Open(out);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(*b->GetString("general.name"), *a->GetString("general.name"));
  ASSERT_EQ(a->tensors().size(), b->tensors().size());
  for (size_t i = 0; i < a->tensors().size(); ++i) {
    EXPECT_EQ(a->tensors()[i].name, b->tensors()[i].name);
    EXPECT_EQ(Bytes(a->tensors()[i]), Bytes(b->tensors()[i]));
  }
}

// Every error leaves no file (final or temporary) behind.
TEST_F(PadModelTest, BadInputIsRejectedWithoutWritingAnything) {
  const std::string in = MakeModel(DType::kF16);
  const std::string out = Path("out.gguf");
  auto expect_error = [&](const std::string& src, const PadOptions& o, StatusCode code,
                          const std::string& needle) {
    auto r = PadModel(src, out, o);
    ASSERT_FALSE(r.ok()) << needle;
    EXPECT_EQ(r.status().code(), code) << r.status().ToString();
    EXPECT_NE(r.status().message().find(needle), std::string::npos) << r.status().message();
    EXPECT_FALSE(fs::exists(out));
  };
  PadOptions o;
  o.extra_layers = -1;
  expect_error(in, o, StatusCode::kInvalidArgument, "must be >= 0, got -1");
  o.extra_layers = 1;
  o.ffn = 64;
  expect_error(in, o, StatusCode::kInvalidArgument, "FFN width 64 (--ffn) is smaller than the "
                                                    "model's FFN width 128");
  o.ffn = 0;
  o.extra_layers = kMaxPaddedLayers;
  expect_error(in, o, StatusCode::kInvalidArgument, "more than the limit");
  o.extra_layers = 1;
  expect_error(Path("missing.gguf"), o, StatusCode::kIoError, "missing.gguf");
  auto same = PadModel(in, in, o);
  ASSERT_FALSE(same.ok());
  EXPECT_NE(same.status().message().find("is the input file"), std::string::npos);

  auto a = File::Open(in);
  ASSERT_TRUE(a.ok());
  // Rewrites the input with a metadata change and/or a tensor dropped or added.
  auto variant = [&](const std::string& name, const std::string& arch, const std::string& drop,
                     const std::string& add) {
    Writer w;
    for (const auto& kv : a->metadata()) w.SetKV(kv.key, kv.value);
    if (!arch.empty()) w.SetKV("general.architecture", Value::Str(arch));
    for (const auto& t : a->tensors()) {
      if (t.name == drop) continue;
      EXPECT_TRUE(w.AddTensor(t.name, t.dims, t.type, t.bytes()).ok());
    }
    if (!add.empty()) {
      const TensorInfo& n = *a->FindTensor("blk.0.attn_norm.weight");
      EXPECT_TRUE(w.AddTensor(add, n.dims, n.type, n.bytes()).ok());
    }
    const std::string p = Path(name);
    EXPECT_TRUE(w.Write(p).ok());
    return p;
  };
  expect_error(variant("qwen.gguf", "qwen2", "", ""), o, StatusCode::kInvalidArgument,
               "general.architecture is 'qwen2'; pad supports llama models only");
  expect_error(variant("noup.gguf", "", "blk.1.ffn_up.weight", ""), o,
               StatusCode::kInvalidArgument, "tensor 'blk.1.ffn_up.weight' is missing");
  expect_error(variant("extra.gguf", "", "", "blk.0.attn_sinks.weight"), o,
               StatusCode::kInvalidArgument, "'blk.0.attn_sinks.weight' is not one pad can extend");
  expect_error(variant("beyond.gguf", "", "", "blk.7.attn_norm.weight"), o,
               StatusCode::kInvalidArgument, "belongs to block 7, but llama.block_count is 2");

  // The output directory does not exist: the writer fails, nothing is left.
  auto r = PadModel(in, Path("no/such/dir/out.gguf"), o);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kIoError) << r.status().ToString();

  std::vector<std::string> keep = {in};
  for (const char* n : {"qwen.gguf", "noup.gguf", "extra.gguf", "beyond.gguf"}) {
    keep.push_back(Path(n));
  }
  EXPECT_TRUE(OtherFiles(keep).empty()) << OtherFiles(keep)[0];
}

}  // namespace
}  // namespace tarmac::gguf
