// CpuFeatures and the ISA level: what this CPU can run (probed once) and which level of kernels
// the process runs now (the one override that tests and benchmarks lower to force a path).
//
// Every kernel choice reads ActiveIsa() (through the dispatch table, kernels/dispatch.h); no
// other file probes CPUID or reads an environment switch. Lowering the level also lowers the
// Highway target the portable kernels dispatch to (scalar: EMU128/SCALAR; avx2*: AVX2), so a
// forced level runs the same code an AVX2-only (or SIMD-less) CPU would.
//
// Levels, each including the ones below it:
//   scalar     the portable C++ / Highway baseline;
//   avx2       AVX2 + FMA + F16C (int8 dot products with vpmaddubsw / vpmaddwd);
//   avx2-vnni  avx2 plus AVX-VNNI (vpdpbusd on ymm; Alder Lake+, Zen 5);
//   avx512     AVX-512 F/BW/VL/DQ + VNNI (+ VBMI/GFNI for the decode matvec);
//   amx        AMX-TILE/BF16/INT8, granted by the OS.
// The override: TARMAC_ISA=<level> in the environment (read once, by InitIsaFromEnvironment or
// on first use) or SetIsaForTest / ScopedIsa (tests). A level above the CPU's is clamped to it.
//
// Thread-safety: the probe is a thread-safe static; the override is an atomic, but changing it
// while kernels run on other threads is a race in the kernels' choices (tests change it on the
// main thread between calls).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace tarmac::kernels {

// Whose cores these are: the memory system differs (how many misses a core keeps in flight),
// so the decode kernels' prefetch distances are tuned per vendor (dispatch.h,
// ChooseStreamPrefetch). Hygon (Zen cores) counts as AMD.
enum class CpuVendor { kOther, kIntel, kAmd };
const char* CpuVendorName(CpuVendor v);  // "other", "intel", "amd"

struct CpuFeatures {
  bool x86 = false;
  CpuVendor vendor = CpuVendor::kOther;
  bool avx2 = false, fma = false, f16c = false;
  bool avx_vnni = false;
  bool avx512f = false, avx512bw = false, avx512vl = false, avx512dq = false;
  bool avx512vnni = false, avx512vbmi = false, gfni = false, avx512bf16 = false;
  bool amx_tile = false, amx_bf16 = false, amx_int8 = false;
  bool amx_os = false;  // the kernel granted this process the tile state (Linux >= 5.16)
};

// Probed once (CPUID, XGETBV, arch_prctl), then cached.
const CpuFeatures& Cpu();

enum class Isa : int { kScalar = 0, kAvx2 = 1, kAvx2Vnni = 2, kAvx512 = 3, kAmx = 4 };
inline constexpr Isa kAllIsas[] = {Isa::kScalar, Isa::kAvx2, Isa::kAvx2Vnni, Isa::kAvx512,
                                   Isa::kAmx};

const char* IsaName(Isa isa);  // "scalar", "avx2", "avx2-vnni", "avx512", "amx"
std::optional<Isa> ParseIsa(std::string_view name);

// The best level this CPU supports.
Isa NativeIsa();
// The level kernels use now: min(NativeIsa(), override).
Isa ActiveIsa();
inline bool IsaAtLeast(Isa isa) { return static_cast<int>(ActiveIsa()) >= static_cast<int>(isa); }
// Whether the CPU supports a level (tests loop over these).
inline bool CpuSupports(Isa isa) { return static_cast<int>(NativeIsa()) >= static_cast<int>(isa); }

// Reads TARMAC_ISA once and applies it; returns an error message naming the bad value (and the
// valid ones) when it is not a level name. Idempotent; called from main() and on first use.
std::optional<std::string> InitIsaFromEnvironment();

// Sets the override (nullopt: none, back to the environment's or native) and re-points
// Highway's dynamic dispatch. Tests only (and `tarmac info --isa`).
void SetIsaForTest(std::optional<Isa> isa);

// Forces a level for one scope and restores the previous override.
class ScopedIsa {
 public:
  explicit ScopedIsa(Isa isa);
  ~ScopedIsa();
  ScopedIsa(const ScopedIsa&) = delete;
  ScopedIsa& operator=(const ScopedIsa&) = delete;

 private:
  int before_;  // the override before (-1: none)
};

// The Highway target the portable kernels dispatch to at a level ("AVX3_SPR", "AVX2",
// "EMU128", ...).
const char* HighwayTargetName(Isa isa);

// One line naming the vendor and the features found ("intel: avx2 fma f16c avx-vnni avx512f
// ... amx-int8 (amx granted)").
std::string DescribeCpu();

}  // namespace tarmac::kernels
