// DType: element types of tensors, numbered exactly as GGML/GGUF number them (the value is
// what a GGUF tensor info stores), with block size and bytes per block for every type a GGUF
// file may contain. tarmac computes with every type llama.cpp computes (floats, the legacy,
// K, IQ, MXFP4 and ternary types; Q8_K as an activation format); the others (Q8_1, the
// integer and f64 types) are known so files holding them can be read and inspected, and are
// rejected with a clear error where compute would need them.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace tarmac {

enum class DType : uint32_t {
  kF32 = 0,
  kF16 = 1,
  kQ4_0 = 2,
  kQ4_1 = 3,
  // 4, 5: Q4_2, Q4_3 (removed from the format)
  kQ5_0 = 6,
  kQ5_1 = 7,
  kQ8_0 = 8,
  kQ8_1 = 9,
  kQ2_K = 10,
  kQ3_K = 11,
  kQ4_K = 12,
  kQ5_K = 13,
  kQ6_K = 14,
  kQ8_K = 15,
  kIQ2_XXS = 16,
  kIQ2_XS = 17,
  kIQ3_XXS = 18,
  kIQ1_S = 19,
  kIQ4_NL = 20,
  kIQ3_S = 21,
  kIQ2_S = 22,
  kIQ4_XS = 23,
  kI8 = 24,
  kI16 = 25,
  kI32 = 26,
  kI64 = 27,
  kF64 = 28,
  kIQ1_M = 29,
  kBF16 = 30,
  // 31..33: Q4_0_4_4, Q4_0_4_8, Q4_0_8_8 (removed)
  kTQ1_0 = 34,
  kTQ2_0 = 35,
  // 36..38: IQ4_NL_4_4, IQ4_NL_4_8, IQ4_NL_8_8 (removed)
  kMXFP4 = 39,
};

struct DTypeTraits {
  std::string_view name;   // as llama.cpp prints it: "f32", "q4_K", ...
  int64_t block_size;      // elements per block (1 for plain types)
  int64_t type_size;       // bytes per block
  bool compute_supported;  // tarmac has dequantize/dot kernels for it
};

// Traits of a known type; nullopt for an unknown or removed type id.
std::optional<DTypeTraits> GetDTypeTraits(uint32_t type_id);
// Preconditions: t is a known type (asserted).
const DTypeTraits& Traits(DType t);
inline std::string_view DTypeName(DType t) { return Traits(t).name; }
// Case-insensitive lookup by name ("q8_0", "Q4_K", "f16", "bf16").
std::optional<DType> DTypeFromName(std::string_view name);

// Bytes of a row of n elements. Preconditions: n is a multiple of the block size.
inline int64_t RowBytes(DType t, int64_t n) {
  const auto& tr = Traits(t);
  return n / tr.block_size * tr.type_size;
}

}  // namespace tarmac
