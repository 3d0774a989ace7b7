// CPU probe and ISA override (see cpu_features.h).

#include "kernels/cpu_features.h"

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>

#include "base/check.h"
#include "hwy/targets.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define TARMAC_CPU_X86 1
#include <cpuid.h>
#include <sys/syscall.h>
#include <unistd.h>
#else
#define TARMAC_CPU_X86 0
#endif

namespace tarmac::kernels {
namespace {

#if TARMAC_CPU_X86
// CPUID leaf 0's vendor string, in register order EBX, EDX, ECX.
CpuVendor VendorOf(unsigned b, unsigned d, unsigned c) {
  char id[13] = {};
  std::memcpy(id, &b, 4);
  std::memcpy(id + 4, &d, 4);
  std::memcpy(id + 8, &c, 4);
  const std::string_view v(id, 12);
  if (v == "GenuineIntel") return CpuVendor::kIntel;
  if (v == "AuthenticAMD" || v == "HygonGenuine") return CpuVendor::kAmd;
  return CpuVendor::kOther;
}
#endif

CpuFeatures Probe() {
  CpuFeatures f;
#if TARMAC_CPU_X86
  f.x86 = true;
  unsigned a, b, c, d;
  if (__get_cpuid_count(0, 0, &a, &b, &c, &d) == 0) return f;
  f.vendor = VendorOf(b, d, c);
  if (__get_cpuid_count(1, 0, &a, &b, &c, &d) == 0) return f;
  const bool osxsave = (c >> 27) & 1;
  f.fma = (c >> 12) & 1;
  f.f16c = (c >> 29) & 1;
  if (!osxsave) return CpuFeatures{.x86 = true, .vendor = f.vendor};
  unsigned xlo, xhi;
  __asm__ volatile("xgetbv" : "=a"(xlo), "=d"(xhi) : "c"(0));
  const uint64_t xcr0 = (static_cast<uint64_t>(xhi) << 32) | xlo;
  const bool os_avx = (xcr0 & 0x6) == 0x6;         // SSE and AVX state
  const bool os_avx512 = (xcr0 & 0xE6) == 0xE6;    // + opmask, ZMM_Hi256, Hi16_ZMM
  const bool os_amx = ((xcr0 >> 17) & 3) == 3;     // XTILECFG, XTILEDATA
  if (!os_avx) return CpuFeatures{.x86 = true, .vendor = f.vendor};
  if (__get_cpuid_count(7, 0, &a, &b, &c, &d) == 0) return f;
  f.avx2 = (b >> 5) & 1;
  if (os_avx512) {
    f.avx512f = (b >> 16) & 1;
    f.avx512dq = (b >> 17) & 1;
    f.avx512bw = (b >> 30) & 1;
    f.avx512vl = (b >> 31) & 1;
    f.avx512vbmi = (c >> 1) & 1;
    f.avx512vnni = (c >> 11) & 1;
  }
  f.gfni = (c >> 8) & 1;
  f.amx_bf16 = os_amx && ((d >> 22) & 1);
  f.amx_tile = os_amx && ((d >> 24) & 1);
  f.amx_int8 = os_amx && ((d >> 25) & 1);
  if (__get_cpuid_count(7, 1, &a, &b, &c, &d) != 0) {
    f.avx_vnni = (a >> 4) & 1;
    f.avx512bf16 = os_avx512 && ((a >> 5) & 1);
  }
  // The tile data must also be granted per process (ARCH_REQ_XCOMP_PERM = 0x1023,
  // XTILEDATA = 18).
  if (f.amx_tile) f.amx_os = syscall(SYS_arch_prctl, 0x1023, 18) == 0;
#endif
  return f;
}

Isa ProbeNative(const CpuFeatures& f) {
  if (!(f.avx2 && f.fma && f.f16c)) return Isa::kScalar;
  const bool avx512 = f.avx512f && f.avx512bw && f.avx512vl && f.avx512dq && f.avx512vnni;
  if (avx512 && f.amx_tile && f.amx_bf16 && f.amx_int8 && f.avx512bf16 && f.amx_os) {
    return Isa::kAmx;
  }
  if (avx512) return Isa::kAvx512;
  return f.avx_vnni ? Isa::kAvx2Vnni : Isa::kAvx2;
}

std::atomic<int> g_override{-1};  // -1: none
std::once_flag g_env_once;
std::optional<std::string> g_env_error;

// Highway's targets on this CPU before any mock (captured on first use).
int64_t NativeHwyTargets() {
  static const int64_t t = [] {
    hwy::SetSupportedTargetsForTest(0);
    return hwy::SupportedTargets();
  }();
  return t;
}

int64_t HwyMaskFor(Isa isa) {
  const int64_t native = NativeHwyTargets();
  if (isa >= Isa::kAvx512) return native;
  int64_t mask = native & (HWY_EMU128 | HWY_SCALAR);
  if (isa >= Isa::kAvx2) mask |= native & HWY_AVX2;
  return mask == 0 ? native : mask;  // no baseline compiled: nothing to lower to
}

// Points Highway's dynamic dispatch at the best target the level allows.
void ApplyHighway(Isa isa) {
  const int64_t mask = HwyMaskFor(isa);
  hwy::SetSupportedTargetsForTest(mask == NativeHwyTargets() ? 0 : mask);
  hwy::GetChosenTarget().Update(hwy::SupportedTargets());
}

}  // namespace

const CpuFeatures& Cpu() {
  static const CpuFeatures f = Probe();
  return f;
}

const char* CpuVendorName(CpuVendor v) {
  switch (v) {
    case CpuVendor::kIntel: return "intel";
    case CpuVendor::kAmd: return "amd";
    case CpuVendor::kOther: return "other";
  }
  return "?";
}

const char* IsaName(Isa isa) {
  switch (isa) {
    case Isa::kScalar: return "scalar";
    case Isa::kAvx2: return "avx2";
    case Isa::kAvx2Vnni: return "avx2-vnni";
    case Isa::kAvx512: return "avx512";
    case Isa::kAmx: return "amx";
  }
  return "?";
}

std::optional<Isa> ParseIsa(std::string_view name) {
  for (Isa isa : kAllIsas) {
    if (name == IsaName(isa)) return isa;
  }
  return std::nullopt;
}

Isa NativeIsa() {
  static const Isa native = ProbeNative(Cpu());
  return native;
}

std::optional<std::string> InitIsaFromEnvironment() {
  std::call_once(g_env_once, [] {
    const char* e = std::getenv("TARMAC_ISA");
    if (e == nullptr || *e == '\0') return;
    const std::optional<Isa> isa = ParseIsa(e);
    if (!isa) {
      g_env_error = std::string("TARMAC_ISA='") + e +
                    "' is not a level (scalar, avx2, avx2-vnni, avx512, amx)";
      return;
    }
    int none = -1;
    if (g_override.compare_exchange_strong(none, static_cast<int>(*isa))) ApplyHighway(*isa);
  });
  return g_env_error;
}

Isa ActiveIsa() {
  static const bool env_ok = [] {
    // main() reports a bad value as a usage error first; a library user gets it here.
    if (const auto err = InitIsaFromEnvironment()) {
      std::fprintf(stderr, "tarmac: %s\n", err->c_str());
      std::exit(2);
    }
    return true;
  }();
  (void)env_ok;
  const int o = g_override.load(std::memory_order_relaxed);
  const Isa native = NativeIsa();
  return o < 0 || o > static_cast<int>(native) ? native : static_cast<Isa>(o);
}

void SetIsaForTest(std::optional<Isa> isa) {
  (void)ActiveIsa();  // the environment first, so it cannot overwrite this later
  g_override.store(isa ? static_cast<int>(*isa) : -1, std::memory_order_relaxed);
  ApplyHighway(ActiveIsa());
}

ScopedIsa::ScopedIsa(Isa isa) : before_(((void)ActiveIsa(), g_override.load())) {
  SetIsaForTest(isa);
}

ScopedIsa::~ScopedIsa() {
  SetIsaForTest(before_ < 0 ? std::nullopt : std::optional<Isa>(static_cast<Isa>(before_)));
}

const char* HighwayTargetName(Isa isa) {
  const int64_t t = HwyMaskFor(isa) & HWY_TARGETS;
  return t == 0 ? "none" : hwy::TargetName(t & -t);  // lowest bit: the best target
}

std::string DescribeCpu() {
  const CpuFeatures& f = Cpu();
  if (!f.x86) return "not x86";
  std::string s;
  const std::string vendor = std::string(CpuVendorName(f.vendor)) + ": ";
  auto add = [&](bool on, const char* name) {
    if (!on) return;
    if (!s.empty()) s += ' ';
    s += name;
  };
  add(f.avx2, "avx2");
  add(f.fma, "fma");
  add(f.f16c, "f16c");
  add(f.avx_vnni, "avx-vnni");
  add(f.avx512f, "avx512f");
  add(f.avx512bw, "avx512bw");
  add(f.avx512vl, "avx512vl");
  add(f.avx512dq, "avx512dq");
  add(f.avx512vnni, "avx512vnni");
  add(f.avx512vbmi, "avx512vbmi");
  add(f.gfni, "gfni");
  add(f.avx512bf16, "avx512bf16");
  add(f.amx_tile, "amx-tile");
  add(f.amx_bf16, "amx-bf16");
  add(f.amx_int8, "amx-int8");
  add(f.amx_os, "(amx granted)");
  return vendor + (s.empty() ? "no AVX2" : s);
}

}  // namespace tarmac::kernels
