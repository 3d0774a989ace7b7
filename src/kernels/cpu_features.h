// CPU feature checks that __builtin_cpu_supports lacks on some compilers (clang 14 rejects
// "f16c", which breaks the clang builds: fuzzers, sanitizers under clang). Pure; thread-safe.
#pragma once

#include <cpuid.h>

namespace tarmac::kernels {

// F16C (half <-> float conversions): CPUID leaf 1, ECX bit 29.
inline bool CpuHasF16c() {
  unsigned a, b, c, d;
  if (__get_cpuid(1, &a, &b, &c, &d) == 0) return false;
  return (c >> 29) & 1;
}

}  // namespace tarmac::kernels
