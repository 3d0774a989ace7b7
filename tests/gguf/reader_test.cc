// Reader tests on valid files: hand-built ones, and the real models in models/ and ../shared.
#include <gtest/gtest.h>

#include <filesystem>
#include <thread>

#include "gguf/gguf_file.h"
#include "gguf/gguf_writer.h"
#include "gguf_test_util.h"

namespace tarmac::gguf {
namespace {

using testing::Bytes;

TEST(GgufReader, MinimalEmptyFile) {
  Bytes b;
  b.Header(0, 0);
  auto f = File::Parse(b.span());
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  EXPECT_EQ(f->version(), 3u);
  EXPECT_EQ(f->alignment(), 32u);
  EXPECT_EQ(f->data_offset(), 32u);
  EXPECT_TRUE(f->metadata().empty());
  EXPECT_TRUE(f->tensors().empty());
  EXPECT_EQ(f->parameter_count(), 0);
}

TEST(GgufReader, Version2Accepted) {
  Bytes b;
  b.Header(0, 1, 2).KvStr("general.architecture", "llama");
  auto f = File::Parse(b.span());
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  EXPECT_EQ(f->version(), 2u);
  EXPECT_EQ(*f->GetString("general.architecture"), "llama");
}

TEST(GgufReader, HandBuiltTensorsAndGetters) {
  Bytes b;
  b.Header(2, 4)
      .KvU32("general.alignment", 64)
      .KvStr("general.name", "tiny")
      .Str("x.eps").U32(6).U32(0x3f800000)     // float32 1.0
      .Str("x.neg").U32(5).U32(0xffffffffu);   // int32 -1
  b.Tensor("a", {4, 2}, 0, 0).Tensor("b", {32}, 8, 64).PadTo(64);
  size_t data_at = b.size();
  b.Zeros(32).PadTo(64).Zeros(34);
  auto f = File::Parse(b.span());
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  EXPECT_EQ(f->alignment(), 64u);
  EXPECT_EQ(f->data_offset(), data_at);
  ASSERT_EQ(f->tensors().size(), 2u);
  const TensorInfo* a = f->FindTensor("a");
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(a->num_elements(), 8);
  EXPECT_EQ(a->num_rows(), 2);
  EXPECT_EQ(a->nbytes, 32u);
  EXPECT_EQ(a->data, b.span().data() + data_at);
  const TensorInfo* bt = f->FindTensor("b");
  ASSERT_NE(bt, nullptr);
  EXPECT_EQ(bt->type, DType::kQ8_0);
  EXPECT_EQ(bt->nbytes, 34u);
  EXPECT_EQ(f->FindTensor("c"), nullptr);
  EXPECT_EQ(f->parameter_count(), 40);
  EXPECT_EQ(f->tensor_bytes(), 66u);

  EXPECT_EQ(*f->GetUint("general.alignment"), 64u);
  EXPECT_EQ(*f->GetFloat("x.eps"), 1.0);
  EXPECT_EQ(*f->GetInt("x.neg"), -1);
  EXPECT_EQ(*f->GetUintOr("missing", 7), 7u);
  EXPECT_EQ(*f->GetFloatOr("missing", 0.5), 0.5);
  // Clear errors that name the key.
  auto missing = f->GetString("nope");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_NE(missing.status().message().find("'nope'"), std::string::npos);
  auto wrong = f->GetUint("x.neg");
  ASSERT_FALSE(wrong.ok());
  EXPECT_NE(wrong.status().message().find("'x.neg'"), std::string::npos);
  EXPECT_NE(wrong.status().message().find("int32"), std::string::npos);
  EXPECT_FALSE(f->GetString("general.alignment").ok());
  EXPECT_FALSE(f->GetFloat("general.alignment").ok());
  EXPECT_FALSE(f->GetUintOr("general.name", 1).ok());  // present with the wrong type
  EXPECT_FALSE(f->GetStringArray("general.name").ok());
}

TEST(GgufReader, NoTensorsNeedsNoPadding) {
  Bytes b;
  b.Header(0, 1).KvStr("k", "v");  // ends unpadded
  auto f = File::Parse(b.span());
  ASSERT_TRUE(f.ok()) << f.status().ToString();
}

TEST(GgufReader, OpenMissingFileIsIoError) {
  auto f = File::Open("/nonexistent/dir/x.gguf");
  ASSERT_FALSE(f.ok());
}

TEST(GgufReader, OpenErrorNamesThePath) {
  auto dir = std::filesystem::temp_directory_path() / ("tarmac_gguf_rd_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  std::string path = (dir / "bad.gguf").string();
  FILE* fp = std::fopen(path.c_str(), "wb");
  ASSERT_NE(fp, nullptr);
  std::fputs("GGUX", fp);
  std::fclose(fp);
  auto f = File::Open(path);
  ASSERT_FALSE(f.ok());
  EXPECT_NE(f.status().message().find(path), std::string::npos);
  EXPECT_NE(f.status().message().find("magic"), std::string::npos);
  std::filesystem::remove_all(dir);
}

struct ModelCase {
  const char* path;
  bool shared;         // not ours: skip when absent
  size_t vocab_size;
};

class RealModel : public ::testing::TestWithParam<ModelCase> {};

std::string ModelPath(const ModelCase& c) {
  return std::string(c.shared ? TARMAC_SHARED_DIR : TARMAC_SOURCE_DIR) + "/" + c.path;
}

TEST_P(RealModel, ReadsAndValidates) {
  const ModelCase& c = GetParam();
  std::string path = ModelPath(c);
  if (!std::filesystem::exists(path)) {
    if (c.shared) GTEST_SKIP() << path << " absent";
    FAIL() << path << " missing (ours, should be in the repo)";
  }
  auto f = File::Open(path);
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  EXPECT_GE(f->version(), 2u);
  EXPECT_EQ(*f->GetString("general.architecture"), "llama");
  auto tokens = f->GetStringArray("tokenizer.ggml.tokens");
  ASSERT_TRUE(tokens.ok()) << tokens.status().ToString();
  EXPECT_EQ(tokens->size(), c.vocab_size);
  ASSERT_NE(f->FindTensor("token_embd.weight"), nullptr);
  EXPECT_EQ(f->FindTensor("token_embd.weight")->dims.size(), 2u);
  EXPECT_EQ(static_cast<size_t>(f->FindTensor("token_embd.weight")->dims[1]), c.vocab_size);
  EXPECT_GT(f->parameter_count(), 0);
  uint64_t end = 0;
  for (const auto& t : f->tensors()) {
    EXPECT_EQ(t.data, f->bytes().data() + f->data_offset() + t.offset);
    end = std::max(end, f->data_offset() + t.offset + t.nbytes);
  }
  EXPECT_LE(end, f->bytes().size());
  // Every metadata value renders, the big ones truncated.
  for (const auto& kv : f->metadata()) {
    EXPECT_FALSE(kv.value.ToJson(16).dump().empty()) << kv.key;
    EXPECT_FALSE(kv.value.ToString().empty()) << kv.key;
  }
  // Moving a File keeps tensor pointers valid (they point into the mapping).
  const uint8_t* p = f->tensors()[0].data;
  File moved = std::move(f).value();
  EXPECT_EQ(moved.tensors()[0].data, p);
  EXPECT_EQ(moved.FindTensor(moved.tensors()[0].name), &moved.tensors()[0]);
}

// Re-writing a file with our Writer gives the identical bytes for files written by llama.cpp's
// writer conventions (alignment 32, every tensor padded), and equal content in any case.
TEST_P(RealModel, RewriteRoundTrips) {
  const ModelCase& c = GetParam();
  std::string path = ModelPath(c);
  if (!std::filesystem::exists(path)) GTEST_SKIP() << path << " absent";
  auto f = File::Open(path);
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  Writer w;
  for (const auto& kv : f->metadata()) w.SetKV(kv.key, kv.value);
  for (const auto& t : f->tensors()) ASSERT_TRUE(w.AddTensor(t.name, t.dims, t.type, t.bytes()).ok());
  auto out = w.WriteToBuffer();
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  auto g = File::Parse(*out);
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  ASSERT_EQ(g->metadata().size(), f->metadata().size());
  for (size_t i = 0; i < f->metadata().size(); ++i) {
    EXPECT_EQ(g->metadata()[i].key, f->metadata()[i].key);
    EXPECT_TRUE(g->metadata()[i].value == f->metadata()[i].value) << f->metadata()[i].key;
  }
  ASSERT_EQ(g->tensors().size(), f->tensors().size());
  for (size_t i = 0; i < f->tensors().size(); ++i) {
    const auto& a = f->tensors()[i];
    const auto& b = g->tensors()[i];
    EXPECT_EQ(a.name, b.name);
    EXPECT_EQ(a.dims, b.dims);
    EXPECT_EQ(a.type, b.type);
    ASSERT_EQ(a.nbytes, b.nbytes);
    EXPECT_EQ(0, std::memcmp(a.data, b.data, a.nbytes)) << a.name;
  }
  if (f->version() == 3 && f->alignment() == 32) {
    bool same = out->size() == f->bytes().size() &&
                std::memcmp(out->data(), f->bytes().data(), out->size()) == 0;
    EXPECT_TRUE(same) << "rewrite of " << c.path << " differs (sizes " << out->size() << " vs "
                      << f->bytes().size() << ")";
  }
}

INSTANTIATE_TEST_SUITE_P(
    Models, RealModel,
    ::testing::Values(ModelCase{"models/wp-11m-f16.gguf", false, 2048},
                      ModelCase{"models/wp-1m-f16.gguf", false, 2048},
                      ModelCase{"models/llama-2-tiny-random.gguf", true, 32000},
                      ModelCase{"models/llama3.2-vocab-random.gguf", true, 128002}),
    [](const auto& info) {
      std::string n = std::filesystem::path(info.param.path).stem().string();
      for (char& ch : n)
        if (!isalnum(static_cast<unsigned char>(ch))) ch = '_';
      return n;
    });

TEST(GgufReader, ConcurrentReadsAreSafe) {
  std::string path = std::string(TARMAC_SOURCE_DIR) + "/models/wp-1m-f16.gguf";
  if (!std::filesystem::exists(path)) GTEST_SKIP();
  auto f = File::Open(path);
  ASSERT_TRUE(f.ok());
  std::vector<std::thread> ts;
  std::atomic<int> bad{0};
  for (int k = 0; k < 4; ++k)
    ts.emplace_back([&] {
      for (int r = 0; r < 50; ++r)
        for (const auto& t : f->tensors())
          if (f->FindTensor(t.name) != &t || !f->Find("general.architecture")) ++bad;
    });
  for (auto& t : ts) t.join();
  EXPECT_EQ(bad.load(), 0);
}

}  // namespace
}  // namespace tarmac::gguf
