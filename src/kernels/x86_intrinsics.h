// <immintrin.h> with GCC's -W(maybe-)uninitialized off for that header only: GCC 12's AVX-512
// intrinsics initialise their "undefined" placeholders from themselves (__Y = __Y), and once
// inlined into the AMX kernels every such use is reported as a warning of ours. Include this
// instead of <immintrin.h>, before anything else that includes it: the pragma reaches only the
// first inclusion (the header's guard makes later ones empty).
#pragma once

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#include <immintrin.h>
#pragma GCC diagnostic pop
#else
#include <immintrin.h>
#endif
