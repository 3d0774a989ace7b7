// Per-SIMD-target kernels of matvec.cc for the quantized weight types (Q8_0, Q4_0, Q4_K,
// Q6_K) and the int16 activation quantization they use. Included by matvec.cc inside
// HWY_NAMESPACE (re-included once per target; needs DF, HalfToF32, TARMAC_HWY_HARDWARE_F16,
// PrefetchBytes and kPrefetchAhead from matvec.cc).
// Pure functions; read-only inputs, outputs only through the given pointers.
#if defined(TARMAC_KERNELS_MATVEC_QUANT_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef TARMAC_KERNELS_MATVEC_QUANT_INL_H_
#undef TARMAC_KERNELS_MATVEC_QUANT_INL_H_
#else
#define TARMAC_KERNELS_MATVEC_QUANT_INL_H_
#endif

// ---------------------------------------------------------------------------------------
// Quantized weights: x is pre-quantized to int16 (ActQ16 below) so each 32-element block is
// an integer dot product by widening multiply-add of i16 pairs (vpmaddwd), converted to f32
// and scaled once per block or group. Block offsets (Q4_0's -8, Q6_K's -32) are exact
// integer corrections through the per-group sums of the quantized x; Q4_K's mins go through
// the same sums in float.

// x quantized per 32-element block j: x[k] ≈ dx[j] · q[k], |q| <= 32767. With S32[j] / S16[g]
// the (exact) sums of q over block j / 16-element group g: dxs32[j] = dx[j]·S32[j],
// dx16[g] = dx[g / 2], dxs16[g] = dx16[g]·S16[g]. Arrays of n/32 or n/16 floats.
struct ActQ16 {
  const int16_t* q;
  const float* dx;
  const float* dxs32;
  const float* dx16;
  const float* dxs16;
};

#if HWY_TARGET != HWY_SCALAR
using DI16 = hn::Repartition<int16_t, DF>;  // 2N lanes of i16
using DI32 = hn::RebindToSigned<DF>;        // N lanes of i32

// f16 scale -> f32 on the integer ports (the vector ports are the bottleneck here); exact
// for normal halves, the rare zero/subnormal/Inf/NaN take the general conversion.
HWY_INLINE float ScaleToF32(uint16_t h) {
  const uint32_t e = h & 0x7c00u;
  if (HWY_UNLIKELY(e == 0 || e == 0x7c00u)) return HalfToF32(h);
  const uint32_t bits = ((h & 0x8000u) << 16) | (((h & 0x7fffu) + 0x1c000u) << 13);
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

// sum += pairwise products of a and b (i16 -> i32, lane i covers elements 2i, 2i+1).
HWY_INLINE hn::Vec<DI32> MulPairs(hn::Vec<DI16> a, hn::Vec<DI16> b, hn::Vec<DI32> sum) {
  const DI32 di32;
  auto odd = hn::Zero(di32);
  const auto even = hn::ReorderWidenMulAccumulate(di32, a, b, sum, odd);
  return hn::RearrangeToOddPlusEven(even, odd);
}

HWY_INLINE hn::Vec<DI16> WidenU8(const uint8_t* p) {
  return hn::PromoteTo(DI16(), hn::LoadU(hn::Rebind<uint8_t, DI16>(), p));
}

// Scales are converted a chunk of blocks at a time with vector ops, off the hot loop.
constexpr int64_t kScaleChunk = 64;

// bits[i] = the u16 at src + i·stride bytes, i < n. Kept as plain 16-bit loads and stores
// (load/store ports): the compiler's vectorization of this gather (pinsrw chains) would
// compete for the vector ports the dot products need; the empty asm prevents it.
HWY_INLINE void CopyScaleBits(const uint16_t* src, size_t stride, uint16_t* bits, int64_t n) {
  const auto* p = reinterpret_cast<const uint8_t*>(src);
  for (int64_t i = 0; i < n; ++i) {
    std::memcpy(&bits[i], p + i * stride, 2);
    asm volatile("" ::: "memory");
  }
}

// out[i] = f32(bits[i]) · dx[i] for i < n (n <= kScaleChunk); returns sum_i f32(bits[i]) ·
// corr_w[i] (0 if corr_w is null).
HWY_INLINE float BlockScales(const uint16_t* HWY_RESTRICT bits, const float* HWY_RESTRICT dx,
                             const float* HWY_RESTRICT corr_w, float* HWY_RESTRICT out,
                             int64_t n) {
  float corr = 0;
  int64_t i = 0;
#if TARMAC_HWY_HARDWARE_F16
  const DF df;
  const hn::Rebind<hwy::float16_t, DF> dh;
  const int64_t N = hn::Lanes(df);
  auto cv = hn::Zero(df);
  for (; i + N <= n; i += N) {
    const auto h = hn::PromoteTo(df, hn::LoadU(dh, reinterpret_cast<const hwy::float16_t*>(bits + i)));
    hn::StoreU(hn::Mul(h, hn::LoadU(df, dx + i)), df, out + i);
    if (corr_w != nullptr) cv = hn::MulAdd(h, hn::LoadU(df, corr_w + i), cv);
  }
  corr = hn::GetLane(hn::SumOfLanes(df, cv));
#endif
  for (; i < n; ++i) {
    const float h = HalfToF32(bits[i]);
    out[i] = h * dx[i];
    if (corr_w != nullptr) corr += h * corr_w[i];
  }
  return corr;
}

// Integer q·x of one Q8_0 block (signed quants).
HWY_INLINE hn::Vec<DI32> BlockQ8_0DotI(const BlockQ8_0& b, const int16_t* xq) {
  const DI16 d16;
  const hn::Rebind<int8_t, DI16> d8;
  const size_t L = hn::Lanes(d16);
  auto s = hn::Zero(DI32());
  for (size_t j = 0; j < kQK8_0; j += L) {
    s = MulPairs(hn::PromoteTo(d16, hn::LoadU(d8, b.qs + j)), hn::LoadU(d16, xq + j), s);
  }
  return s;
}

float DotQ8_0(const BlockQ8_0* b, const ActQ16& x, int64_t nb) {
  const DF df;
  auto a0 = hn::Zero(df), a1 = hn::Zero(df);
  HWY_ALIGN uint16_t bits[kScaleChunk];
  HWY_ALIGN float sc[kScaleChunk];
  for (int64_t c0 = 0; c0 < nb; c0 += kScaleChunk) {
    const int64_t cn = std::min(kScaleChunk, nb - c0);
    const BlockQ8_0* cb = b + c0;
    CopyScaleBits(&cb[0].d, sizeof(cb[0]), bits, cn);
    BlockScales(bits, x.dx + c0, nullptr, sc, cn);
    const int16_t* xq = x.q + c0 * kQK8_0;
    int64_t i = 0;
    for (; i + 2 <= cn; i += 2) {
      PrefetchBytes(reinterpret_cast<const char*>(cb + i) + kPrefetchAhead, 2 * sizeof(BlockQ8_0));
      a0 = hn::MulAdd(hn::ConvertTo(df, BlockQ8_0DotI(cb[i], xq + i * kQK8_0)), hn::Set(df, sc[i]), a0);
      a1 = hn::MulAdd(hn::ConvertTo(df, BlockQ8_0DotI(cb[i + 1], xq + (i + 1) * kQK8_0)),
                      hn::Set(df, sc[i + 1]), a1);
    }
    if (i < cn) {
      a0 = hn::MulAdd(hn::ConvertTo(df, BlockQ8_0DotI(cb[i], xq + i * kQK8_0)), hn::Set(df, sc[i]), a0);
    }
  }
  return hn::GetLane(hn::SumOfLanes(df, hn::Add(a0, a1)));
}

// Integer q·x of one Q4_0 block with the unsigned nibbles 0..15 (caller applies the -8).
HWY_INLINE hn::Vec<DI32> BlockQ4_0DotI(const BlockQ4_0& b, const int16_t* xq) {
  const DI16 d16;
  const size_t L = hn::Lanes(d16);
  const auto k15 = hn::Set(d16, 15);
  if constexpr (hn::MaxLanes(DI16()) >= 32) {
    // One vector holds the whole block: low nibbles (elements 0..15) in the lower half.
    const hn::Half<DI16> dh;
    const auto v = hn::PromoteTo(dh, hn::LoadU(hn::Rebind<uint8_t, decltype(dh)>(), b.qs));
    const auto w = hn::Combine(d16, hn::ShiftRight<4>(v), hn::And(v, hn::Set(dh, 15)));
    (void)k15;
    (void)L;
    return MulPairs(w, hn::LoadU(d16, xq), hn::Zero(DI32()));
  } else {
    auto s = hn::Zero(DI32());
    for (size_t j = 0; j < kQK4_0 / 2; j += L) {
      const auto v = WidenU8(b.qs + j);
      s = MulPairs(hn::And(v, k15), hn::LoadU(d16, xq + j), s);
      s = MulPairs(hn::ShiftRight<4>(v), hn::LoadU(d16, xq + 16 + j), s);
    }
    return s;
  }
}

// With 32 i16 lanes (AVX-512) Q4_0 takes x in "pair layout": for each full pair of blocks
// (2p, 2p+1), the 64 quantized values are stored as [2p: 0..15, 2p+1: 0..15, 2p: 16..31,
// 2p+1: 16..31], matching the low/high nibbles of both blocks widened side by side. A last
// odd block stays in natural order.
constexpr bool kQ4_0PairLayout = hn::MaxLanes(DI16()) == 32;

float DotQ4_0(const BlockQ4_0* b, const ActQ16& x, int64_t nb) {
  const DF df;
  auto a0 = hn::Zero(df), a1 = hn::Zero(df);
  float corr = 0;
  HWY_ALIGN uint16_t bits[kScaleChunk];
  HWY_ALIGN float sc[kScaleChunk];
  for (int64_t c0 = 0; c0 < nb; c0 += kScaleChunk) {
    const int64_t cn = std::min(kScaleChunk, nb - c0);
    const BlockQ4_0* cb = b + c0;
    CopyScaleBits(&cb[0].d, sizeof(cb[0]), bits, cn);
    corr += BlockScales(bits, x.dx + c0, x.dxs32 + c0, sc, cn);
    const int16_t* xq = x.q + c0 * kQK4_0;
    int64_t i = 0;
    if constexpr (kQ4_0PairLayout) {
      // Two blocks per vector: widen both blocks' bytes at once, so the nibble split, the
      // multiply-adds and the conversion are shared (x is in the pair layout, see
      // Q4_0PairLayoutT); i32 lanes 0..7 belong to block i, 8..15 to block i + 1.
      const hn::Rebind<uint8_t, DI16> du8;
      const hn::Half<decltype(du8)> du8h;
      const hn::Half<DF> dfh;
      const DI16 d16;
      const auto k15 = hn::Set(d16, 15);
      for (; i + 2 <= cn; i += 2) {
        __builtin_prefetch(reinterpret_cast<const char*>(cb + i) + kPrefetchAhead, 0, 3);
        const auto w = hn::PromoteTo(
            d16, hn::Combine(du8, hn::LoadU(du8h, cb[i + 1].qs), hn::LoadU(du8h, cb[i].qs)));
        const int16_t* xp = xq + i * kQK4_0;
        auto s = MulPairs(hn::And(w, k15), hn::LoadU(d16, xp), hn::Zero(DI32()));
        s = MulPairs(hn::ShiftRight<4>(w), hn::LoadU(d16, xp + 32), s);
        const auto scale = hn::Combine(df, hn::Set(dfh, sc[i + 1]), hn::Set(dfh, sc[i]));
        if (i & 2) {
          a1 = hn::MulAdd(hn::ConvertTo(df, s), scale, a1);
        } else {
          a0 = hn::MulAdd(hn::ConvertTo(df, s), scale, a0);
        }
      }
    }
    for (; i + 2 <= cn; i += 2) {
      __builtin_prefetch(reinterpret_cast<const char*>(cb + i) + kPrefetchAhead, 0, 3);
      a0 = hn::MulAdd(hn::ConvertTo(df, BlockQ4_0DotI(cb[i], xq + i * kQK4_0)), hn::Set(df, sc[i]), a0);
      a1 = hn::MulAdd(hn::ConvertTo(df, BlockQ4_0DotI(cb[i + 1], xq + (i + 1) * kQK4_0)),
                      hn::Set(df, sc[i + 1]), a1);
    }
    if (i < cn) {
      a0 = hn::MulAdd(hn::ConvertTo(df, BlockQ4_0DotI(cb[i], xq + i * kQK4_0)), hn::Set(df, sc[i]), a0);
    }
  }
  return hn::GetLane(hn::SumOfLanes(df, hn::Add(a0, a1))) - 8.0f * corr;
}

// Unpacks the eight 6-bit scales and mins of a Q4_K block at once, on 32-bit words:
// out[0..8) = scales, out[8..16) = mins (same values as Q4KScaleMin).
HWY_INLINE void Q4KScalesMins(const uint8_t* s, uint8_t* out) {
  uint32_t a, b, c;
  std::memcpy(&a, s, 4);
  std::memcpy(&b, s + 4, 4);
  std::memcpy(&c, s + 8, 4);
  const uint32_t sc_lo = a & 0x3f3f3f3fu;
  const uint32_t sc_hi = (c & 0x0f0f0f0fu) | (((a >> 6) & 0x03030303u) << 4);
  const uint32_t m_lo = b & 0x3f3f3f3fu;
  const uint32_t m_hi = ((c >> 4) & 0x0f0f0f0fu) | (((b >> 6) & 0x03030303u) << 4);
  std::memcpy(out, &sc_lo, 4);
  std::memcpy(out + 4, &sc_hi, 4);
  std::memcpy(out + 8, &m_lo, 4);
  std::memcpy(out + 12, &m_hi, 4);
}

float DotQ4_K(const BlockQ4_K* b, const ActQ16& x, int64_t nb) {
  const DF df;
  const DI16 d16;
  const size_t L = hn::Lanes(d16);
  const auto k15 = hn::Set(d16, 15);
  const hn::CappedTag<float, 8> d8f;
  const hn::Rebind<int32_t, decltype(d8f)> d8i;
  const hn::Rebind<uint8_t, decltype(d8f)> d8u;
  auto a0 = hn::Zero(df), a1 = hn::Zero(df);
  auto corr = hn::Zero(d8f);
  HWY_ALIGN uint8_t sm[16];
  HWY_ALIGN float sc[8];
  for (int64_t i = 0; i < nb; ++i) {
    PrefetchBytes(reinterpret_cast<const char*>(b + i) + kPrefetchAhead, sizeof(BlockQ4_K));
    const float d = ScaleToF32(b[i].d), dmin = ScaleToF32(b[i].dmin);
    Q4KScalesMins(b[i].scales, sm);
    // sc[j] = d · scale_j · dx_j; mins: corr += dmin · min_j · dx_j · S32_j.
    for (size_t j = 0; j < 8; j += hn::Lanes(d8f)) {
      const auto scf = hn::ConvertTo(d8f, hn::PromoteTo(d8i, hn::LoadU(d8u, sm + j)));
      const auto mf = hn::ConvertTo(d8f, hn::PromoteTo(d8i, hn::LoadU(d8u, sm + 8 + j)));
      hn::Store(hn::Mul(hn::Mul(scf, hn::Set(d8f, d)), hn::LoadU(d8f, x.dx + 8 * i + j)), d8f,
                sc + j);
      corr = hn::MulAdd(hn::Mul(mf, hn::Set(d8f, dmin)), hn::LoadU(d8f, x.dxs32 + 8 * i + j), corr);
    }
    const int16_t* xq = x.q + i * kQK_K;
    for (int pair = 0; pair < 4; ++pair) {
      const uint8_t* q = b[i].qs + 32 * pair;
      auto s0 = hn::Zero(DI32()), s1 = hn::Zero(DI32());
      for (size_t l = 0; l < 32; l += L) {
        const auto v = WidenU8(q + l);
        s0 = MulPairs(hn::And(v, k15), hn::LoadU(d16, xq + 64 * pair + l), s0);
        s1 = MulPairs(hn::ShiftRight<4>(v), hn::LoadU(d16, xq + 64 * pair + 32 + l), s1);
      }
      a0 = hn::MulAdd(hn::ConvertTo(df, s0), hn::Set(df, sc[2 * pair]), a0);
      a1 = hn::MulAdd(hn::ConvertTo(df, s1), hn::Set(df, sc[2 * pair + 1]), a1);
    }
  }
  return hn::GetLane(hn::SumOfLanes(df, hn::Add(a0, a1))) -
         hn::GetLane(hn::SumOfLanes(d8f, corr));
}

float DotQ6_K(const BlockQ6_K* b, const ActQ16& x, int64_t nb) {
  const DF df;
  const DI16 d16;
  constexpr size_t kL = hn::MaxLanes(DI16());
  const size_t L = hn::Lanes(d16);
  const auto k15 = hn::Set(d16, 15), k48 = hn::Set(d16, 48);
  auto a0 = hn::Zero(df), a1 = hn::Zero(df), a2 = hn::Zero(df), a3 = hn::Zero(df);
  const hn::CappedTag<float, 16> d16f;
  const hn::Rebind<int32_t, decltype(d16f)> d16i;
  const hn::Rebind<int8_t, decltype(d16f)> d16s8;
  auto corr = hn::Zero(d16f);
  HWY_ALIGN float gscale[16];  // d · sc[g] · dx of the group's 32-block
  for (int64_t i = 0; i < nb; ++i) {
    PrefetchBytes(reinterpret_cast<const char*>(b + i) + kPrefetchAhead, sizeof(BlockQ6_K));
    const auto d = hn::Set(d16f, ScaleToF32(b[i].d));
    for (size_t g = 0; g < 16; g += hn::Lanes(d16f)) {
      const auto scf = hn::Mul(hn::ConvertTo(d16f, hn::PromoteTo(d16i, hn::LoadU(d16s8, b[i].scales + g))), d);
      hn::Store(hn::Mul(scf, hn::LoadU(d16f, x.dx16 + 16 * i + g)), d16f, gscale + g);
      corr = hn::MulAdd(scf, hn::LoadU(d16f, x.dxs16 + 16 * i + g), corr);
    }
    for (int half = 0; half < 2; ++half) {
      const uint8_t* ql = b[i].ql + 64 * half;
      const uint8_t* qh = b[i].qh + 32 * half;
      const float* gsc = gscale + 8 * half;
      const int16_t* xq = x.q + i * kQK_K + 128 * half;
      // out[32k + l] (k = 0..3) is quant k of position l; its group is 2k + l/16.
      for (size_t l = 0; l < 32; l += L) {
        const auto a = WidenU8(ql + l);
        const auto c = WidenU8(ql + 32 + l);
        const auto h = WidenU8(qh + l);
        const auto q1 = hn::Or(hn::And(a, k15), hn::And(hn::ShiftLeft<4>(h), k48));
        const auto q2 = hn::Or(hn::And(c, k15), hn::And(hn::ShiftLeft<2>(h), k48));
        const auto q3 = hn::Or(hn::ShiftRight<4>(a), hn::And(h, k48));
        const auto q4 = hn::Or(hn::ShiftRight<4>(c), hn::And(hn::ShiftRight<2>(h), k48));
        const DI32 d32;
        const auto z = hn::Zero(d32);
        const auto p1 = hn::ConvertTo(df, MulPairs(q1, hn::LoadU(d16, xq + l), z));
        const auto p2 = hn::ConvertTo(df, MulPairs(q2, hn::LoadU(d16, xq + 32 + l), z));
        const auto p3 = hn::ConvertTo(df, MulPairs(q3, hn::LoadU(d16, xq + 64 + l), z));
        const auto p4 = hn::ConvertTo(df, MulPairs(q4, hn::LoadU(d16, xq + 96 + l), z));
        const size_t g = l / 16;
        if constexpr (kL >= 32) {
          // i32 lanes 0..7 hold group g, lanes 8..15 group g+1.
          const hn::Half<DF> dfh;
          auto scale2 = [&](size_t k) {
            return hn::Combine(df, hn::Set(dfh, gsc[2 * k + 1]), hn::Set(dfh, gsc[2 * k]));
          };
          a0 = hn::MulAdd(p1, scale2(0), a0);
          a1 = hn::MulAdd(p2, scale2(1), a1);
          a2 = hn::MulAdd(p3, scale2(2), a2);
          a3 = hn::MulAdd(p4, scale2(3), a3);
        } else {
          a0 = hn::MulAdd(p1, hn::Set(df, gsc[g]), a0);
          a1 = hn::MulAdd(p2, hn::Set(df, gsc[g + 2]), a1);
          a2 = hn::MulAdd(p3, hn::Set(df, gsc[g + 4]), a2);
          a3 = hn::MulAdd(p4, hn::Set(df, gsc[g + 6]), a3);
        }
      }
    }
  }
  return hn::GetLane(hn::SumOfLanes(df, hn::Add(hn::Add(a0, a1), hn::Add(a2, a3)))) -
         32.0f * hn::GetLane(hn::SumOfLanes(d16f, corr));
}

#else   // HWY_TARGET == HWY_SCALAR: one lane, no pair ops; plain scalar code.

// Dequantizes the row block by block (exact, reference decode) and dots it with the
// dequantized activations dx·q, in f32.
float DotQuantScalar(DType type, const void* row, const ActQ16& x, int64_t n) {
  const int64_t bs = Traits(type).block_size, bytes = Traits(type).type_size;
  float w[kQK_K];
  float s = 0;
  for (int64_t b = 0; b < n / bs; ++b) {
    DequantizeRowRef(type, static_cast<const uint8_t*>(row) + b * bytes, w, bs);
    for (int64_t k = 0; k < bs; ++k) s += w[k] * (x.dx[(b * bs + k) / 32] * x.q[b * bs + k]);
  }
  return s;
}
float DotQ8_0(const BlockQ8_0* b, const ActQ16& x, int64_t nb) {
  return DotQuantScalar(DType::kQ8_0, b, x, nb * kQK8_0);
}
float DotQ4_0(const BlockQ4_0* b, const ActQ16& x, int64_t nb) {
  return DotQuantScalar(DType::kQ4_0, b, x, nb * kQK4_0);
}
float DotQ4_K(const BlockQ4_K* b, const ActQ16& x, int64_t nb) {
  return DotQuantScalar(DType::kQ4_K, b, x, nb * kQK_K);
}
float DotQ6_K(const BlockQ6_K* b, const ActQ16& x, int64_t nb) {
  return DotQuantScalar(DType::kQ6_K, b, x, nb * kQK_K);
}
#endif  // HWY_TARGET != HWY_SCALAR

bool Q4_0PairLayoutT() {
#if HWY_TARGET != HWY_SCALAR
  return kQ4_0PairLayout;
#else
  return false;
#endif
}

// Quantizes x (n a multiple of 32) into q and the per-block arrays of ActQ16, stored at aux:
// dx[n/32], dxs32[n/32], dx16[n/16], dxs16[n/16]. Rounds to nearest even.
void QuantizeActT(const float* x, int64_t n, int16_t* q, float* aux) {
  const DF df;
  const hn::RebindToSigned<DF> di;
  const hn::Rebind<int16_t, DF> d16;
  const size_t N = hn::Lanes(df);
  float* dx = aux;
  float* dxs32 = dx + n / 32;
  float* dx16 = dxs32 + n / 32;
  float* dxs16 = dx16 + n / 16;
  for (int64_t j = 0; j < n / 32; ++j) {
    const float* xb = x + 32 * j;
    auto vmax = hn::Zero(df);
    for (size_t k = 0; k < 32; k += N) vmax = hn::Max(vmax, hn::Abs(hn::LoadU(df, xb + k)));
    const float amax = hn::GetLane(hn::MaxOfLanes(df, vmax));
    const float d = amax / 32767.0f;
    const auto inv = hn::Set(df, amax > 0 ? 32767.0f / amax : 0.0f);
    int32_t sums[2];
    for (size_t g = 0; g < 2; ++g) {
      auto sum = hn::Zero(di);
      for (size_t k = 16 * g; k < 16 * g + 16; k += N) {
        const auto v = hn::Min(hn::Max(hn::NearestInt(hn::Mul(hn::LoadU(df, xb + k), inv)),
                                       hn::Set(di, -32767)),
                               hn::Set(di, 32767));
        hn::StoreU(hn::DemoteTo(d16, v), d16, q + 32 * j + k);
        sum = hn::Add(sum, v);
      }
      sums[g] = hn::GetLane(hn::SumOfLanes(di, sum));
    }
    dx[j] = d;
    dxs32[j] = d * static_cast<float>(sums[0] + sums[1]);
    dx16[2 * j] = dx16[2 * j + 1] = d;
    dxs16[2 * j] = d * static_cast<float>(sums[0]);
    dxs16[2 * j + 1] = d * static_cast<float>(sums[1]);
  }
}

#endif  // include guard toggle
