#include "tensor/dtype.h"

#include <array>
#include <cctype>

#include "base/check.h"

namespace tarmac {
namespace {

constexpr size_t kMaxTypeId = 40;

constexpr std::array<std::optional<DTypeTraits>, kMaxTypeId> MakeTable() {
  std::array<std::optional<DTypeTraits>, kMaxTypeId> t{};
  t[0] = DTypeTraits{"f32", 1, 4, true};
  t[1] = DTypeTraits{"f16", 1, 2, true};
  t[2] = DTypeTraits{"q4_0", 32, 18, true};
  t[3] = DTypeTraits{"q4_1", 32, 20, true};
  t[6] = DTypeTraits{"q5_0", 32, 22, true};
  t[7] = DTypeTraits{"q5_1", 32, 24, true};
  t[8] = DTypeTraits{"q8_0", 32, 34, true};
  t[9] = DTypeTraits{"q8_1", 32, 36, false};
  t[10] = DTypeTraits{"q2_K", 256, 84, true};
  t[11] = DTypeTraits{"q3_K", 256, 110, true};
  t[12] = DTypeTraits{"q4_K", 256, 144, true};
  t[13] = DTypeTraits{"q5_K", 256, 176, true};
  t[14] = DTypeTraits{"q6_K", 256, 210, true};
  t[15] = DTypeTraits{"q8_K", 256, 292, true};
  t[16] = DTypeTraits{"iq2_xxs", 256, 66, true};
  t[17] = DTypeTraits{"iq2_xs", 256, 74, true};
  t[18] = DTypeTraits{"iq3_xxs", 256, 98, true};
  t[19] = DTypeTraits{"iq1_s", 256, 50, true};
  t[20] = DTypeTraits{"iq4_nl", 32, 18, true};
  t[21] = DTypeTraits{"iq3_s", 256, 110, true};
  t[22] = DTypeTraits{"iq2_s", 256, 82, true};
  t[23] = DTypeTraits{"iq4_xs", 256, 136, true};
  t[24] = DTypeTraits{"i8", 1, 1, false};
  t[25] = DTypeTraits{"i16", 1, 2, false};
  t[26] = DTypeTraits{"i32", 1, 4, false};
  t[27] = DTypeTraits{"i64", 1, 8, false};
  t[28] = DTypeTraits{"f64", 1, 8, false};
  t[29] = DTypeTraits{"iq1_m", 256, 56, true};
  t[30] = DTypeTraits{"bf16", 1, 2, true};
  t[34] = DTypeTraits{"tq1_0", 256, 54, true};
  t[35] = DTypeTraits{"tq2_0", 256, 66, true};
  t[39] = DTypeTraits{"mxfp4", 32, 17, true};
  return t;
}

constexpr auto kTable = MakeTable();

}  // namespace

std::optional<DTypeTraits> GetDTypeTraits(uint32_t type_id) {
  if (type_id >= kMaxTypeId) return std::nullopt;
  return kTable[type_id];
}

const DTypeTraits& Traits(DType t) {
  auto id = static_cast<uint32_t>(t);
  TARMAC_CHECK(id < kMaxTypeId && kTable[id].has_value());
  return *kTable[id];
}

std::optional<DType> DTypeFromName(std::string_view name) {
  for (uint32_t id = 0; id < kMaxTypeId; ++id) {
    if (!kTable[id]) continue;
    std::string_view n = kTable[id]->name;
    if (n.size() != name.size()) continue;
    bool eq = true;
    for (size_t i = 0; i < n.size() && eq; ++i)
      eq = std::tolower(static_cast<unsigned char>(n[i])) ==
           std::tolower(static_cast<unsigned char>(name[i]));
    if (eq) return static_cast<DType>(id);
  }
  return std::nullopt;
}

}  // namespace tarmac
