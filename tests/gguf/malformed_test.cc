// Malformed-file suite: hand-built broken GGUF files, each must be rejected with a DataLoss
// status naming the field (and never crash, read out of range or allocate from a bad count).
// Runs under ASan/UBSan in `make test-asan`.
#include <gtest/gtest.h>

#include <cstdint>
#include <random>

#include "base/check.h"
#include "gguf/gguf_file.h"
#include "gguf/gguf_writer.h"
#include "gguf_test_util.h"

namespace tarmac::gguf {
namespace {

using testing::Bytes;

// Parses b and expects a DataLoss whose message contains every one of `parts`.
void ExpectRejected(const Bytes& b, std::initializer_list<std::string_view> parts) {
  auto f = File::Parse(b.span());
  ASSERT_FALSE(f.ok()) << "accepted a malformed file";
  EXPECT_EQ(f.status().code(), StatusCode::kDataLoss) << f.status().ToString();
  const std::string& msg = f.status().message();
  EXPECT_EQ(msg.rfind("gguf: ", 0), 0u) << msg;
  for (auto p : parts) EXPECT_NE(msg.find(p), std::string::npos) << "'" << p << "' not in: " << msg;
}

// Header + one f32 [8] tensor "t" with 32 bytes of data: a valid base to break.
Bytes OneTensor(std::vector<uint64_t> dims = {8}, uint32_t type = 0, uint64_t offset = 0,
                size_t data = 32) {
  Bytes b;
  b.Header(1, 0).Tensor("t", dims, type, offset).PadTo(32).Zeros(data);
  return b;
}

TEST(GgufMalformed, BaseFilesAreValid) {
  ASSERT_TRUE(File::Parse(OneTensor().span()).ok());
}

// --- header ---

TEST(GgufMalformed, EmptyFile) { ExpectRejected(Bytes(), {"magic", "offset 0", "0 bytes"}); }

TEST(GgufMalformed, BadMagic) {
  Bytes b;
  b.Raw("GGML").U32(3).U64(0).U64(0);
  ExpectRejected(b, {"magic", "GGML"});
}

TEST(GgufMalformed, Version1Rejected) {
  Bytes b;
  b.Magic().U32(1).U32(0).U32(0);
  ExpectRejected(b, {"version", "offset 4", "version 1"});
}

TEST(GgufMalformed, UnsupportedVersion) {
  Bytes b;
  b.Header(0, 0, 4);
  ExpectRejected(b, {"version", "unsupported version 4"});
}

TEST(GgufMalformed, BigEndianRejected) {
  Bytes b;
  b.Magic().U32(0x03000000).U64(0).U64(0);
  ExpectRejected(b, {"version", "big-endian"});
}

TEST(GgufMalformed, TruncatedHeader) {
  Bytes b;
  b.Magic().U32(3).U32(0);  // tensor count cut in half
  ExpectRejected(b, {"tensor count", "offset 8", "truncated"});
}

TEST(GgufMalformed, AbsurdKvCount) {
  Bytes b;
  b.Header(0, uint64_t{1} << 60).KvU32("a", 1);
  ExpectRejected(b, {"kv count", "offset 16", "1152921504606846976"});
}

TEST(GgufMalformed, AbsurdTensorCount) {
  Bytes b;
  b.Header(~uint64_t{0}, 0).Tensor("t", {8}, 0, 0);
  ExpectRejected(b, {"tensor count", "offset 8"});
}

// --- metadata ---

TEST(GgufMalformed, KeyLengthPastEnd) {
  Bytes b;
  b.Header(0, 1).U64(1000).Raw("abcdefghijklmnop");
  ExpectRejected(b, {"kv 0 key length", "offset 24", "1000 bytes"});
}

TEST(GgufMalformed, HugeKeyLength) {
  Bytes b;
  b.Header(0, 1).U64(~uint64_t{0}).Raw("abcdefghijklmnop");
  ExpectRejected(b, {"kv 0 key length", "offset 24"});
}

TEST(GgufMalformed, EmptyKey) {
  Bytes b;
  b.Header(0, 1).Str("").U32(4).U32(1).Zeros(8);
  ExpectRejected(b, {"kv 0 key", "empty key"});
}

TEST(GgufMalformed, InvalidUtf8Key) {
  Bytes b;
  b.Header(0, 1).KvU32("bad\xc3(", 1);
  ExpectRejected(b, {"kv 0 'bad\\xc3(' key", "UTF-8"});
}

TEST(GgufMalformed, DuplicateKey) {
  Bytes b;
  b.Header(0, 2).KvU32("a.b", 1).KvU32("a.b", 2);
  ExpectRejected(b, {"kv 1 'a.b' key", "offset 43", "duplicate key"});
}

TEST(GgufMalformed, UnknownValueType) {
  Bytes b;
  b.Header(0, 1).Str("k").U32(13).U64(0);
  ExpectRejected(b, {"kv 0 'k' value type", "offset 33", "unknown value type 13"});
}

TEST(GgufMalformed, TruncatedScalarValue) {
  Bytes b;
  b.Header(0, 1).Str("k").U32(10).U32(0).U8(0).U8(0);  // uint64 needs 8 bytes, has 6
  ExpectRejected(b, {"kv 0 'k' uint64 value", "truncated"});
}

TEST(GgufMalformed, StringValuePastEnd) {
  Bytes b;
  b.Header(0, 1).Str("name").U32(8).U64(50).Raw("short");
  ExpectRejected(b, {"kv 0 'name' string value length", "offset 40", "50 bytes"});
}

TEST(GgufMalformed, BoolNotZeroOrOne) {
  Bytes b;
  b.Header(0, 1).Str("flag").U32(7).U8(2).Zeros(8);
  ExpectRejected(b, {"kv 0 'flag' bool value", "must be 0 or 1"});
}

TEST(GgufMalformed, BoolArrayElementNotZeroOrOne) {
  Bytes b;
  b.Header(0, 1).Str("flags").U32(9).U32(7).U64(3).U8(1).U8(0).U8(255).Zeros(8);
  ExpectRejected(b, {"kv 0 'flags' array element 2", "must be 0 or 1"});
}

TEST(GgufMalformed, HugeArrayCount) {
  Bytes b;
  b.Header(0, 1).Str("tokenizer.ggml.tokens").U32(9).U32(8).U64(~uint64_t{0}).Str("a");
  ExpectRejected(b, {"kv 0 'tokenizer.ggml.tokens' array length", "offset 61",
                     "18446744073709551615 elements"});
}

TEST(GgufMalformed, ArrayCountPastEnd) {
  Bytes b;
  b.Header(0, 1).Str("scores").U32(9).U32(6).U64(1000).Zeros(64);
  ExpectRejected(b, {"kv 0 'scores' array length", "1000 elements of type float32"});
}

TEST(GgufMalformed, ArrayStringElementPastEnd) {
  Bytes b;
  b.Header(0, 1).Str("toks").U32(9).U32(8).U64(2).Str("ok").U64(99).Raw("xy");
  ExpectRejected(b, {"kv 0 'toks' string value length", "99 bytes"});
}

TEST(GgufMalformed, UnknownArrayElementType) {
  Bytes b;
  b.Header(0, 1).Str("a").U32(9).U32(77).U64(0);
  ExpectRejected(b, {"kv 0 'a' array element type", "unknown value type 77"});
}

TEST(GgufMalformed, NestedArrayDepthBomb) {
  Bytes b;
  b.Header(0, 1).Str("deep").U32(9);
  for (int i = 0; i < 1000; ++i) b.U32(9).U64(1);  // array of array of array ...
  b.U32(0).U64(0);
  ExpectRejected(b, {"kv 0 'deep' array", "nested more than 8 deep"});
}

TEST(GgufMalformed, NestedArrayWithinLimitAccepted) {
  Bytes b;
  b.Header(0, 1).Str("deep").U32(9);
  for (int i = 0; i < kMaxArrayDepth - 1; ++i) b.U32(9).U64(1);
  b.U32(0).U64(1).U8(7);
  auto f = File::Parse(b.span());
  ASSERT_TRUE(f.ok()) << f.status().ToString();
}

TEST(GgufMalformed, ArrayOverElementBudget) {
  // Enough bytes for every element, but more elements than the per-file budget (each would
  // cost ~48 bytes of memory): rejected before anything is allocated.
  Bytes b;
  b.Header(0, 1).Str("big").U32(9).U32(0).U64(kMaxTotalArrayElements + 1);
  b.Zeros(kMaxTotalArrayElements + 1);
  ExpectRejected(b, {"kv 0 'big' array length", "limit"});
}

// --- general.alignment ---

TEST(GgufMalformed, AlignmentZero) {
  Bytes b;
  b.Header(0, 1).KvU32("general.alignment", 0);
  ExpectRejected(b, {"kv 0 'general.alignment' value", "nonzero power of two"});
}

TEST(GgufMalformed, AlignmentNotPowerOfTwo) {
  Bytes b;
  b.Header(0, 1).KvU32("general.alignment", 3);
  ExpectRejected(b, {"general.alignment", "is 3"});
}

TEST(GgufMalformed, AlignmentWrongType) {
  Bytes b;
  b.Header(0, 1).Str("general.alignment").U32(10).U64(32);
  ExpectRejected(b, {"kv 0 'general.alignment' value", "must be uint32, found uint64"});
}

// --- tensor infos ---

TEST(GgufMalformed, TensorNameEmpty) {
  Bytes b;
  b.Header(1, 0).Tensor("", {8}, 0, 0).PadTo(32).Zeros(32);
  ExpectRejected(b, {"tensor 0 name", "offset 24", "empty name"});
}

TEST(GgufMalformed, TensorNameTooLong) {
  Bytes b;
  b.Header(1, 0).Tensor(std::string(64, 'x'), {8}, 0, 0).PadTo(32).Zeros(32);
  ExpectRejected(b, {"tensor 0", "name", "64 bytes, at most 63"});
}

TEST(GgufMalformed, TensorNameInvalidUtf8) {
  Bytes b;
  b.Header(1, 0).Tensor("w\xed\xa0\x80", {8}, 0, 0).PadTo(32).Zeros(32);  // a surrogate
  ExpectRejected(b, {"tensor 0", "name is not valid UTF-8"});
}

TEST(GgufMalformed, DuplicateTensorNames) {
  Bytes b;
  b.Header(2, 0).Tensor("w", {8}, 0, 0).Tensor("w", {8}, 0, 32).PadTo(32).Zeros(64);
  ExpectRejected(b, {"tensor 1 'w' name", "duplicate tensor name"});
}

TEST(GgufMalformed, NDimsZero) {
  Bytes b;
  b.Header(1, 0).Str("t").U32(0).U32(0).U64(0).PadTo(32).Zeros(32);
  ExpectRejected(b, {"tensor 0 't' n_dims", "offset 33", "n_dims is 0"});
}

TEST(GgufMalformed, NDimsFive) {
  ExpectRejected(OneTensor({1, 1, 1, 1, 8}), {"tensor 0 't' n_dims", "n_dims is 5"});
}

TEST(GgufMalformed, DimZero) {
  ExpectRejected(OneTensor({8, 0}), {"tensor 0 't' dims", "offset 37", "dim 1 is 0"});
}

TEST(GgufMalformed, DimNegative) {
  ExpectRejected(OneTensor({~uint64_t{0}}), {"tensor 0 't' dims", "dim 0 is -1"});
}

TEST(GgufMalformed, ByteSizeOverflow) {
  // 2^62 f32 elements: the count fits int64, the byte size does not fit 64 bits.
  ExpectRejected(OneTensor({uint64_t{1} << 31, uint64_t{1} << 31}),
                 {"tensor 0 't' dims", "byte size overflows"});
}

TEST(GgufMalformed, DimProductOverflow) {
  uint64_t big = uint64_t{1} << 32;
  ExpectRejected(OneTensor({big, big}), {"tensor 0 't' dims", "overflows int64"});
}

TEST(GgufMalformed, ByteSizeHugeButNoOverflow) {
  // 2^60 f32 elements (2^62 bytes): sizes fit 64 bits but the data cannot be in the file.
  ExpectRejected(OneTensor({uint64_t{1} << 30, uint64_t{1} << 30}),
                 {"tensor 0 't' offset", "outside"});
}

TEST(GgufMalformed, UnknownDtype) {
  ExpectRejected(OneTensor({8}, 40), {"tensor 0 't' type", "unknown ggml type 40"});
  ExpectRejected(OneTensor({8}, 0xffffffffu), {"tensor 0 't' type", "unknown ggml type"});
}

TEST(GgufMalformed, RemovedDtypes) {
  for (uint32_t id : {4u, 5u, 31u, 32u, 33u, 36u, 37u, 38u})
    ExpectRejected(OneTensor({32}, id), {"tensor 0 't' type", "removed"});
}

TEST(GgufMalformed, RowNotMultipleOfBlock) {
  ExpectRejected(OneTensor({33}, 8), {"tensor 0 't' dims", "row length 33", "q8_0 block size 32"});
  // The K, IQ and ternary types' 256-element blocks, and the 32-element ones of the others.
  ExpectRejected(OneTensor({288}, 13), {"tensor 0 't' dims", "row length 288", "q5_K block size 256"});
  ExpectRejected(OneTensor({96}, 16), {"row length 96", "iq2_xxs block size 256"});
  ExpectRejected(OneTensor({300}, 35), {"row length 300", "tq2_0 block size 256"});
  ExpectRejected(OneTensor({40}, 39), {"row length 40", "mxfp4 block size 32"});
}

// A block whose bytes (a codebook type's indices and signs) run past the data section.
TEST(GgufMalformed, TruncatedBlockData) {
  // One iq2_xxs block is 66 bytes, one iq4_xs block 136: the 64-byte data section holds neither.
  ExpectRejected(OneTensor({256}, 16, 0, 64), {"tensor 0 't' offset", "truncated"});
  ExpectRejected(OneTensor({256}, 23, 0, 64), {"tensor 0 't' offset", "truncated"});
}

TEST(GgufMalformed, MisalignedOffset) {
  ExpectRejected(OneTensor({8}, 0, 4, 64), {"tensor 0 't' offset", "not a multiple of the alignment 32"});
}

TEST(GgufMalformed, OffsetOutsideFile) {
  ExpectRejected(OneTensor({8}, 0, 4096), {"tensor 0 't' offset", "outside the 32-byte data section"});
}

TEST(GgufMalformed, OffsetPlusSizeOverflows) {
  ExpectRejected(OneTensor({8}, 0, ~uint64_t{0} - 31), {"tensor 0 't' offset", "outside"});
}

TEST(GgufMalformed, DataTruncated) {
  ExpectRejected(OneTensor({8}, 0, 0, 31), {"tensor 0 't' offset", "truncated"});
}

TEST(GgufMalformed, DataSectionPastEnd) {
  Bytes b;
  b.Header(1, 0).Tensor("t", {8}, 0, 0);  // no padding, no data
  ExpectRejected(b, {"tensor 0 't' offset", "past the end"});
}

TEST(GgufMalformed, OverlappingTensors) {
  Bytes b;
  b.Header(2, 0).Tensor("a", {16}, 0, 0).Tensor("b", {8}, 0, 32).PadTo(32).Zeros(64);
  ExpectRejected(b, {"tensor 1 'b' offset", "overlaps tensor 0 'a'"});
}

TEST(GgufMalformed, SameOffsetTensors) {
  Bytes b;
  b.Header(2, 0).Tensor("a", {8}, 0, 0).Tensor("b", {8}, 0, 0).PadTo(32).Zeros(64);
  ExpectRejected(b, {"offset", "overlaps"});
}

TEST(GgufMalformed, TensorInfoTruncatedInDims) {
  Bytes b;
  b.Header(1, 0).Str("t").U32(4).U64(8).U64(1).U32(1);  // 33 bytes: passes the count check
  ExpectRejected(b, {"tensor 0 't' dims", "truncated"});
}

TEST(GgufMalformed, ErrorNamesLaterKvAndTensorIndices) {
  Bytes b;
  b.Header(2, 2).KvU32("a", 1).KvStr("b", "x");
  b.Tensor("blk.0.attn_q.weight", {32, 2}, 0, 0).Tensor("blk.0.attn_k.weight", {32, 2}, 5, 256);
  b.PadTo(32).Zeros(512);
  ExpectRejected(b, {"tensor 1 'blk.0.attn_k.weight' type", "type 5 (Q4_3)", "removed"});
}

// --- whole-file sweeps ---

// A valid file with every value type, nested arrays and several tensors whose sizes are
// multiples of 32 (so the file ends exactly at the last tensor's data, without padding).
std::vector<uint8_t> RichValidFile() {
  Writer w;
  w.SetKV("general.architecture", Value::Str("llama"));
  w.SetKV("u8", Value::U8(1));
  w.SetKV("i8", Value::I8(-1));
  w.SetKV("u16", Value::U16(2));
  w.SetKV("i16", Value::I16(-2));
  w.SetKV("u32", Value::U32(3));
  w.SetKV("i32", Value::I32(-3));
  w.SetKV("f32", Value::F32(0.5f));
  w.SetKV("b", Value::Bool(true));
  w.SetKV("u64", Value::U64(4));
  w.SetKV("i64", Value::I64(-4));
  w.SetKV("f64", Value::F64(0.25));
  w.SetKV("strs", Value::StrArray({"x", "yy", ""}));
  w.SetKV("nested", Value::Array(ValueType::kArray,
                                 {Value::Array(ValueType::kBool, {Value::Bool(false)}),
                                  Value::Array(ValueType::kString, {Value::Str("z")})}));
  static std::vector<uint8_t> a(64, 1), q(34 * 16, 2);
  TARMAC_CHECK(w.AddTensor("a", {16}, DType::kF32, a).ok());
  TARMAC_CHECK(w.AddTensor("q", {32, 16}, DType::kQ8_0, q).ok());
  return std::move(w.WriteToBuffer()).value();
}

TEST(GgufMalformed, EveryPrefixRejected) {
  std::vector<uint8_t> full = RichValidFile();
  ASSERT_TRUE(File::Parse(full).ok());
  for (size_t n = 0; n < full.size(); ++n) {
    // A fresh heap copy of exactly n bytes, so ASan catches any read past the prefix.
    std::vector<uint8_t> prefix(full.begin(), full.begin() + n);
    auto f = File::Parse(prefix);
    ASSERT_FALSE(f.ok()) << "prefix of " << n << " bytes accepted";
    EXPECT_EQ(f.status().code(), StatusCode::kDataLoss) << n;
  }
}

// Random byte corruption must never crash (each result is either a clean error or a file that
// validates); run under ASan/UBSan to catch out-of-range reads.
TEST(GgufMalformed, RandomCorruptionNeverCrashes) {
  std::vector<uint8_t> full = RichValidFile();
  std::mt19937 rng(1234);
  int accepted = 0;
  for (int iter = 0; iter < 3000; ++iter) {
    std::vector<uint8_t> b = full;
    int flips = 1 + static_cast<int>(rng() % 4);
    for (int k = 0; k < flips; ++k) {
      size_t at = rng() % b.size();
      b[at] = (rng() % 3 == 0) ? 0xff : static_cast<uint8_t>(rng());
    }
    b.resize(b.size() - rng() % 8);
    auto f = File::Parse(b);
    if (!f.ok()) {
      EXPECT_EQ(f.status().code(), StatusCode::kDataLoss);
      continue;
    }
    ++accepted;
    for (const auto& t : f->tensors()) {
      ASSERT_GE(t.data, b.data());
      ASSERT_LE(t.data + t.nbytes, b.data() + b.size());
    }
    for (const auto& kv : f->metadata()) (void)kv.value.ToJson(4).dump();
  }
  EXPECT_GT(accepted, 0);  // corruption of tensor data bytes is invisible to the reader
}

}  // namespace
}  // namespace tarmac::gguf
