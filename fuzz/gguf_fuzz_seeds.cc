// Writes a seed corpus for gguf_reader_fuzz: small valid GGUF files covering every value type,
// nested arrays, several dtypes and alignments; plus, for each model path given, a shrunken
// copy (all metadata kept with arrays cut to a few items, every tensor made tiny) so the
// fuzzer starts from realistic key names and layouts without megabyte inputs.
//
// Usage: gguf_fuzz_seeds OUT_DIR [MODEL.gguf ...]
#include <cstdio>
#include <string>
#include <vector>

#include "gguf/gguf_file.h"
#include "gguf/gguf_writer.h"

using namespace tarmac;
using namespace tarmac::gguf;

namespace {

int Save(const Writer& w, const std::string& path) {
  Status st = w.Write(path);
  if (!st.ok()) {
    std::fprintf(stderr, "%s\n", st.ToString().c_str());
    return 1;
  }
  return 0;
}

Value Shrink(const Value& v, size_t keep) {
  if (!v.is_array()) return v;
  std::vector<Value> items;
  const auto& a = *v.AsArray();
  for (size_t i = 0; i < a.size() && i < keep; ++i) items.push_back(Shrink(a[i], keep));
  return Value::Array(*v.array_type(), std::move(items));
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s OUT_DIR [MODEL.gguf ...]\n", argv[0]);
    return 2;
  }
  std::string dir = argv[1];
  int rc = 0;
  static std::vector<uint8_t> bytes(4096, 0x3c);

  {  // empty
    Writer w;
    rc |= Save(w, dir + "/empty.gguf");
  }
  {  // every value type, nested arrays, one tensor per common dtype
    Writer w;
    w.SetKV("general.architecture", Value::Str("llama"));
    w.SetKV("u8", Value::U8(1));
    w.SetKV("i8", Value::I8(-1));
    w.SetKV("u16", Value::U16(2));
    w.SetKV("i16", Value::I16(-2));
    w.SetKV("u32", Value::U32(3));
    w.SetKV("i32", Value::I32(-3));
    w.SetKV("f32", Value::F32(0.5f));
    w.SetKV("bool", Value::Bool(true));
    w.SetKV("str", Value::Str("text"));
    w.SetKV("u64", Value::U64(4));
    w.SetKV("i64", Value::I64(-4));
    w.SetKV("f64", Value::F64(0.25));
    w.SetKV("tokens", Value::StrArray({"<s>", "</s>", "a", "b"}));
    std::vector<float> sc = {0.f, -1.f, -2.f, -3.f};
    w.SetKV("scores", Value::F32Array(sc));
    w.SetKV("nested", Value::Array(ValueType::kArray,
                                   {Value::Array(ValueType::kBool, {Value::Bool(false)}),
                                    Value::Array(ValueType::kArray, {Value::Array(ValueType::kUint8, {Value::U8(9)})})}));
    struct T {
      const char* name;
      std::vector<int64_t> dims;
      DType type;
    } ts[] = {{"f32", {4, 2}, DType::kF32},     {"f16", {8}, DType::kF16},
              {"bf16", {2, 2}, DType::kBF16},   {"q8_0", {32, 2}, DType::kQ8_0},
              {"q4_0", {32}, DType::kQ4_0},     {"q4_k", {256}, DType::kQ4_K},
              {"q6_k", {256}, DType::kQ6_K},    {"i32", {3, 1, 1, 2}, DType::kI32}};
    for (const auto& t : ts) {
      int64_t ne = 1;
      for (auto d : t.dims) ne *= d;
      size_t n = static_cast<size_t>(RowBytes(t.type, ne));
      if (!w.AddTensor(t.name, t.dims, t.type, std::span<const uint8_t>(bytes.data(), n)).ok()) rc = 1;
    }
    rc |= Save(w, dir + "/all-types.gguf");
    if (!w.SetAlignment(64).ok()) rc = 1;
    rc |= Save(w, dir + "/align64.gguf");
  }
  for (int i = 2; i < argc; ++i) {
    auto f = File::Open(argv[i]);
    if (!f.ok()) {
      std::fprintf(stderr, "skipping %s: %s\n", argv[i], f.status().ToString().c_str());
      continue;
    }
    Writer w;
    for (const auto& kv : f->metadata()) w.SetKV(kv.key, Shrink(kv.value, 6));
    for (const auto& t : f->tensors()) {
      int64_t row = Traits(t.type).block_size;
      std::vector<int64_t> dims(t.dims.size(), 1);
      dims[0] = row;
      size_t n = static_cast<size_t>(RowBytes(t.type, row));
      if (!w.AddTensor(t.name, dims, t.type, std::span<const uint8_t>(bytes.data(), n)).ok()) rc = 1;
    }
    std::string base = argv[i];
    base = base.substr(base.find_last_of('/') + 1);
    rc |= Save(w, dir + "/shrunk-" + base);
  }
  return rc;
}
