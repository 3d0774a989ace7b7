// Writer tests: full round trip of every value type and several dtypes, streaming fill,
// atomic write, alignment and validation errors.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <limits>

#include "gguf/gguf_file.h"
#include "gguf/gguf_writer.h"

namespace tarmac::gguf {
namespace {

namespace fs = std::filesystem;

std::vector<uint8_t> Pattern(size_t n, uint8_t seed) {
  std::vector<uint8_t> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<uint8_t>(seed + i * 31 + (i >> 7));
  return v;
}

class TempDir {
 public:
  TempDir() {
    path_ = fs::temp_directory_path() /
            ("tarmac_gguf_wr_" + std::to_string(::getpid()) + "_" + std::to_string(counter_++));
    fs::create_directories(path_);
  }
  ~TempDir() { fs::remove_all(path_); }
  std::string File(const std::string& name) const { return (path_ / name).string(); }
  size_t Count() const {
    return static_cast<size_t>(std::distance(fs::directory_iterator(path_), fs::directory_iterator()));
  }

 private:
  static inline int counter_ = 0;
  fs::path path_;
};

std::vector<KeyValue> EveryValueType() {
  float nan_payload;
  uint32_t bits = 0x7fc01234;
  std::memcpy(&nan_payload, &bits, 4);
  std::vector<KeyValue> kv;
  kv.push_back({"t.u8", Value::U8(250)});
  kv.push_back({"t.i8", Value::I8(-100)});
  kv.push_back({"t.u16", Value::U16(65000)});
  kv.push_back({"t.i16", Value::I16(-30000)});
  kv.push_back({"t.u32", Value::U32(4000000000u)});
  kv.push_back({"t.i32", Value::I32(-2000000000)});
  kv.push_back({"t.f32", Value::F32(3.25f)});
  kv.push_back({"t.f32nan", Value::F32(nan_payload)});
  kv.push_back({"t.bool", Value::Bool(true)});
  kv.push_back({"t.str", Value::Str("héllo \"world\"\n")});
  kv.push_back({"t.empty_str", Value::Str("")});
  kv.push_back({"t.u64", Value::U64(std::numeric_limits<uint64_t>::max())});
  kv.push_back({"t.i64", Value::I64(std::numeric_limits<int64_t>::min())});
  kv.push_back({"t.f64", Value::F64(-1e300)});
  kv.push_back({"t.strs", Value::StrArray({"a", "", "ccc"})});
  std::vector<float> fs = {1.5f, -2.0f, INFINITY};
  kv.push_back({"t.f32s", Value::F32Array(fs)});
  std::vector<int32_t> is = {1, -2, 3};
  kv.push_back({"t.i32s", Value::I32Array(is)});
  kv.push_back({"t.bools", Value::Array(ValueType::kBool, {Value::Bool(false), Value::Bool(true)})});
  kv.push_back({"t.empty_arr", Value::Array(ValueType::kUint64, {})});
  kv.push_back({"t.nested",
                Value::Array(ValueType::kArray,
                             {Value::Array(ValueType::kUint8, {Value::U8(1), Value::U8(2)}),
                              Value::Array(ValueType::kString, {Value::Str("x")}),
                              Value::Array(ValueType::kArray,
                                           {Value::Array(ValueType::kFloat64, {Value::F64(0.5)})})})});
  return kv;
}

TEST(GgufWriter, RoundTripEveryValueTypeAndDtypes) {
  Writer w;
  auto kvs = EveryValueType();
  for (const auto& kv : kvs) w.SetKV(kv.key, kv.value);
  auto f32 = Pattern(4 * 6, 1);       // f32 [3, 2]
  auto f16 = Pattern(2 * 64, 2);      // f16 [64]
  auto q8 = Pattern(34 * 2 * 3, 3);   // q8_0 [64, 3]
  auto q4k = Pattern(144 * 2, 4);     // q4_K [256, 1, 2]
  auto bf16 = Pattern(2 * 8, 5);      // bf16 [2, 2, 1, 2]
  auto i8 = Pattern(7, 6);            // i8 [7]
  ASSERT_TRUE(w.AddTensor("w.f32", {3, 2}, DType::kF32, f32).ok());
  ASSERT_TRUE(w.AddTensor("w.f16", {64}, DType::kF16, f16).ok());
  ASSERT_TRUE(w.AddTensor("w.q8_0", {64, 3}, DType::kQ8_0, q8).ok());
  ASSERT_TRUE(w.AddTensor("w.q4_k", {256, 1, 2}, DType::kQ4_K, q4k).ok());
  ASSERT_TRUE(w.AddTensor("w.bf16", {2, 2, 1, 2}, DType::kBF16, bf16).ok());
  ASSERT_TRUE(w.AddTensor("w.i8", {7}, DType::kI8, [&](std::span<uint8_t> out) {
                 EXPECT_EQ(out.size(), 7u);
                 std::copy(i8.begin(), i8.end(), out.begin());
                 return Status::Ok();
               }).ok());
  TempDir dir;
  std::string path = dir.File("all.gguf");
  ASSERT_TRUE(w.Write(path).ok());
  EXPECT_EQ(dir.Count(), 1u);  // no temp file left behind

  auto f = File::Open(path);
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  EXPECT_EQ(f->version(), 3u);
  ASSERT_EQ(f->metadata().size(), kvs.size());
  for (size_t i = 0; i < kvs.size(); ++i) {
    EXPECT_EQ(f->metadata()[i].key, kvs[i].key);
    EXPECT_TRUE(f->metadata()[i].value == kvs[i].value)
        << kvs[i].key << ": " << f->metadata()[i].value.ToString();
  }
  // NaN payload survives bit-exactly.
  EXPECT_EQ(f->Find("t.f32nan")->bits(), 0x7fc01234u);
  EXPECT_EQ(*f->Find("t.u64")->AsUint64(), std::numeric_limits<uint64_t>::max());
  EXPECT_FALSE(f->Find("t.u64")->AsInt64().has_value());
  EXPECT_EQ(*f->Find("t.i64")->AsInt64(), std::numeric_limits<int64_t>::min());
  EXPECT_FALSE(f->Find("t.i8")->AsUint64().has_value());
  EXPECT_EQ(*f->Find("t.i8")->AsInt64(), -100);

  struct Want {
    const char* name;
    std::vector<int64_t> dims;
    DType type;
    const std::vector<uint8_t>* data;
  };
  std::vector<Want> want = {{"w.f32", {3, 2}, DType::kF32, &f32},
                            {"w.f16", {64}, DType::kF16, &f16},
                            {"w.q8_0", {64, 3}, DType::kQ8_0, &q8},
                            {"w.q4_k", {256, 1, 2}, DType::kQ4_K, &q4k},
                            {"w.bf16", {2, 2, 1, 2}, DType::kBF16, &bf16},
                            {"w.i8", {7}, DType::kI8, &i8}};
  ASSERT_EQ(f->tensors().size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    const TensorInfo& t = f->tensors()[i];
    EXPECT_EQ(t.name, want[i].name);
    EXPECT_EQ(t.dims, want[i].dims);
    EXPECT_EQ(t.type, want[i].type);
    EXPECT_EQ(t.offset % 32, 0u);
    ASSERT_EQ(t.nbytes, want[i].data->size());
    EXPECT_EQ(0, std::memcmp(t.data, want[i].data->data(), t.nbytes)) << t.name;
  }
  // Padding between tensors is zero.
  const auto& ts = f->tensors();
  for (size_t i = 0; i + 1 < ts.size(); ++i)
    for (uint64_t o = ts[i].offset + ts[i].nbytes; o < ts[i + 1].offset; ++o)
      EXPECT_EQ(f->bytes()[f->data_offset() + o], 0) << "padding after " << ts[i].name;

  // WriteToBuffer gives the same bytes as the file.
  auto buf = w.WriteToBuffer();
  ASSERT_TRUE(buf.ok());
  ASSERT_EQ(buf->size(), f->bytes().size());
  EXPECT_EQ(0, std::memcmp(buf->data(), f->bytes().data(), buf->size()));
}

TEST(GgufWriter, ValueRendering) {
  auto kvs = EveryValueType();
  for (const auto& kv : kvs) {
    EXPECT_FALSE(kv.value.ToJson().dump().empty());
    EXPECT_FALSE(kv.value.ToString().empty());
  }
  EXPECT_EQ(Value::U32(7).ToString(), "7");
  EXPECT_EQ(Value::Bool(false).ToString(), "false");
  EXPECT_EQ(Value::Str("a\"b").ToString(), "\"a\\\"b\"");
  std::vector<int32_t> many(100, 1);
  EXPECT_EQ(Value::I32Array(many).ToString(2), "[1, 1, ... (98 more)]");
  auto j = Value::I32Array(many).ToJson(3);
  ASSERT_EQ(j.size(), 4u);
  EXPECT_EQ(j[3], "... (97 more)");
  EXPECT_EQ(Value::F32(NAN).ToJson(), "nan");
  EXPECT_EQ(Value::Str(std::string("\xff", 1)).ToJson(), "\xEF\xBF\xBD");
  EXPECT_EQ(*Value::Array(ValueType::kString, {}).array_type(), ValueType::kString);
  EXPECT_FALSE(Value::U8(1).array_type().has_value());
  EXPECT_FALSE(Value::U8(1).AsDouble().has_value());
  EXPECT_EQ(Value::U8(1).AsString(), nullptr);
  EXPECT_EQ(Value::U8(1).AsArray(), nullptr);
  EXPECT_FALSE(Value::Bool(true).AsUint64().has_value());
}

TEST(GgufWriter, SetKVReplacesInPlace) {
  Writer w;
  w.SetKV("a", Value::U32(1));
  w.SetKV("b", Value::U32(2));
  w.SetKV("a", Value::Str("x"));
  ASSERT_EQ(w.metadata().size(), 2u);
  EXPECT_EQ(w.metadata()[0].key, "a");
  EXPECT_EQ(*w.metadata()[0].value.AsString(), "x");
  EXPECT_TRUE(w.RemoveKV("a"));
  EXPECT_FALSE(w.RemoveKV("a"));
  EXPECT_EQ(w.metadata().size(), 1u);
}

TEST(GgufWriter, AlignmentHonoured) {
  Writer w;
  EXPECT_FALSE(w.SetAlignment(0).ok());
  EXPECT_FALSE(w.SetAlignment(48).ok());
  ASSERT_TRUE(w.SetAlignment(256).ok());
  auto a = Pattern(4, 1), b = Pattern(8, 2);
  ASSERT_TRUE(w.AddTensor("a", {1}, DType::kF32, a).ok());
  ASSERT_TRUE(w.AddTensor("b", {2}, DType::kF32, b).ok());
  auto buf = w.WriteToBuffer();
  ASSERT_TRUE(buf.ok());
  EXPECT_EQ(buf->size() % 256, 0u);
  auto f = File::Parse(*buf);
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  EXPECT_EQ(f->alignment(), 256u);
  EXPECT_EQ(f->data_offset() % 256, 0u);
  EXPECT_EQ(f->tensors()[1].offset, 256u);

  Writer bad;
  bad.SetKV("general.alignment", Value::U64(64));
  EXPECT_FALSE(bad.WriteToBuffer().ok());
  bad.SetKV("general.alignment", Value::U32(12));
  EXPECT_FALSE(bad.WriteToBuffer().ok());
}

TEST(GgufWriter, AddTensorValidates) {
  Writer w;
  auto d = Pattern(34, 0);
  EXPECT_FALSE(w.AddTensor("", {32}, DType::kQ8_0, d).ok());
  EXPECT_FALSE(w.AddTensor(std::string(64, 'n'), {32}, DType::kQ8_0, d).ok());
  EXPECT_TRUE(w.AddTensor(std::string(63, 'n'), {32}, DType::kQ8_0, d).ok());
  EXPECT_FALSE(w.AddTensor("bad\xff", {32}, DType::kQ8_0, d).ok());
  EXPECT_FALSE(w.AddTensor("x", {}, DType::kQ8_0, d).ok());
  EXPECT_FALSE(w.AddTensor("x", {32, 1, 1, 1, 1}, DType::kQ8_0, d).ok());
  EXPECT_FALSE(w.AddTensor("x", {33}, DType::kQ8_0, d).ok());  // not a block multiple
  EXPECT_FALSE(w.AddTensor("x", {0}, DType::kF32, d).ok());
  EXPECT_FALSE(w.AddTensor("x", {64}, DType::kQ8_0, d).ok());  // data size mismatch
  EXPECT_FALSE(w.AddTensor("x", {int64_t{1} << 40, int64_t{1} << 40}, DType::kF32, d).ok());
  EXPECT_FALSE(w.AddTensor("x", {32}, static_cast<DType>(4), d).ok());
  EXPECT_TRUE(w.AddTensor("x", {32}, DType::kQ8_0, d).ok());
  auto st = w.AddTensor("x", {32}, DType::kQ8_0, d);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("duplicate"), std::string::npos);
  EXPECT_EQ(w.num_tensors(), 2u);
}

TEST(GgufWriter, KeyValidation) {
  Writer w;
  w.SetKV("", Value::U8(1));
  EXPECT_FALSE(w.WriteToBuffer().ok());
  Writer w2;
  w2.SetKV("k\xc0\x80", Value::U8(1));  // overlong encoding
  EXPECT_FALSE(w2.WriteToBuffer().ok());
  Writer w3;
  Value v = Value::U8(0);
  for (int i = 0; i < kMaxArrayDepth + 1; ++i)
    v = Value::Array(v.type(), {v});
  w3.SetKV("deep", v);
  EXPECT_FALSE(w3.WriteToBuffer().ok());
}

TEST(GgufWriter, FailedFillLeavesNoFile) {
  TempDir dir;
  std::string path = dir.File("m.gguf");
  Writer w;
  auto a = Pattern(4, 1);
  ASSERT_TRUE(w.AddTensor("a", {1}, DType::kF32, a).ok());
  ASSERT_TRUE(w.AddTensor("b", {1}, DType::kF32, [](std::span<uint8_t>) {
                 return IoError("disk on fire");
               }).ok());
  Status st = w.Write(path);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("'b'"), std::string::npos);
  EXPECT_NE(st.message().find("disk on fire"), std::string::npos);
  EXPECT_EQ(dir.Count(), 0u);
  EXPECT_FALSE(w.Write(dir.File("no/such/dir.gguf")).ok());
}

TEST(GgufWriter, OverwritesExistingFileAtomically) {
  TempDir dir;
  std::string path = dir.File("m.gguf");
  Writer w1;
  w1.SetKV("v", Value::U32(1));
  ASSERT_TRUE(w1.Write(path).ok());
  Writer w2;
  w2.SetKV("v", Value::U32(2));
  ASSERT_TRUE(w2.Write(path).ok());
  auto f = File::Open(path);
  ASSERT_TRUE(f.ok());
  EXPECT_EQ(*f->GetUint("v"), 2u);
  EXPECT_EQ(dir.Count(), 1u);
}

}  // namespace
}  // namespace tarmac::gguf
