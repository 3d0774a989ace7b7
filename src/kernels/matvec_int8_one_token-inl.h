// The one-token pass over interleaved Q8_0 / Q4_0 / Q4_K groups (matvec_int8_avx2.cc), written
// once for two targets: matvec_int8_avx2.cc includes this file twice, defining
// TARMAC_ONE_TOKEN_NAME (the function), TARMAC_ONE_TOKEN_TARGET (its target attribute) and
// TARMAC_ONE_TOKEN_VNNI (true: the sums by vpdpbusd, Q8StepVnni / Q4StepVnni; false: by
// vpmaddubsw, Q8Step / Q4Step). Only there, inside its namespace, after those helpers.

// One token of Q8_0 / Q4_0 / Q4_K (kMins) group g of pk into y and, with NG 2, group g2 of pk2
// into y2 (the next group of the same matrix, or a Partner's: matvec_int8_avx2.h), both
// halves of each in one pass: per block the products of HalfBlockSums* for one token, with
// the sums, accumulators and super-block scales in named registers (GCC keeps the generic
// passes' arrays on the stack, their indices still loop variables when it scalarizes). Each
// group's products are the same, op for op, whether it runs alone or beside another. Two
// groups walk two weight streams at once and share each activation broadcast: a core on Intel
// then keeps more of the stream in flight (bench/NOTES.md).
template <bool kQ8, bool kMins, int NG>
TARMAC_ONE_TOKEN_TARGET void TARMAC_ONE_TOKEN_NAME(const QuantInterleaved& pk, int64_t g,
                                                   const QuantInterleaved& pk2, int64_t g2,
                                                   const int8_t* xq, const Acts& a, float* y,
                                                   float* y2, const StreamPrefetch& pf,
                                                   bool prefetch) {
  static_assert(!(kQ8 && kMins) && (NG == 1 || NG == 2));
  TARMAC_DCHECK(g < pk.groups() && (NG == 1 || g2 < pk2.groups()));
  TARMAC_DCHECK(pk2.type() == pk.type() && pk2.blocks() == pk.blocks());
  constexpr DType kT = kQ8 ? DType::kQ8_0 : kMins ? DType::kQ4_K : DType::kQ4_0;
  constexpr int64_t kU = QuantInterleaved::UnitBlocks(kT);
  const int64_t nb = pk.blocks();
  const uint8_t* grp = pk.group(g);
  const uint8_t* grp2 = NG == 2 ? pk2.group(g2) : grp;  // the second stream (NG 2)
  __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
  __m256 acc2 = _mm256_setzero_ps(), acc3 = _mm256_setzero_ps();  // the second group's halves
  SuperScales ss{}, ss2{};  // Q4_K: each group's, set at each super-block
  // Groups g, g + 1 of one matrix: each stream's next pass is two groups on (RunOffSkip).
  const int64_t stride = pk.group_stride();
  const int64_t skip = NG == 2 && &pk2 == &pk && g2 == g + 1 ? stride : 0;
  for (int64_t b = 0; b < nb; ++b) {
    const int64_t off = QuantInterleaved::BlockOffset(kT, b);
    const uint8_t* p = grp + off;
    const uint8_t* p2 = grp2 + off;
    if (prefetch) {
      const int64_t s2 = RunOffSkip(off, pf.l2_ahead, stride, skip);
      const int64_t s1 = RunOffSkip(off, pf.l1_ahead, stride, skip);
      PrefetchInterleavedBlock<kT>(pf, p, b, s2, s1);
      if constexpr (NG == 2) PrefetchInterleavedBlock<kT>(pf, p2, b, s2, s1);
    }
    const auto* xb = reinterpret_cast<const int32_t*>(xq + b * kQB);
    __m256i i0, i1, i2, i3;  // the halves' int32 sums, 8 rows each (i2, i3: the second group)
    if constexpr (TARMAC_ONE_TOKEN_VNNI) {
      i0 = i1 = i2 = i3 = _mm256_set1_epi32(a.corr[b]);
      if constexpr (kQ8) {
        for (int s = 0; s < 8; ++s) {
          const __m256i x = _mm256_set1_epi32(xb[s]);
          Q8StepVnni(p + 64 * s, x, &i0, &i1);
          if constexpr (NG == 2) Q8StepVnni(p2 + 64 * s, x, &i2, &i3);
        }
      } else {
        for (int s = 0; s < 4; ++s) {
          const __m256i xl = _mm256_set1_epi32(xb[s]), xh = _mm256_set1_epi32(xb[4 + s]);
          Q4StepVnni(p + 64 * s, xl, xh, &i0, &i1);
          if constexpr (NG == 2) Q4StepVnni(p2 + 64 * s, xl, xh, &i2, &i3);
        }
      }
    } else if constexpr (kQ8) {
      i0 = i1 = i2 = i3 = _mm256_setzero_si256();
      for (int s = 0; s < 8; ++s) {
        const __m256i x = _mm256_set1_epi32(xb[s]);
        Q8Step(p + 64 * s, x, &i0, &i1);
        if constexpr (NG == 2) Q8Step(p2 + 64 * s, x, &i2, &i3);
      }
    } else {
      const __m256i ones = _mm256_set1_epi16(1);
      __m256i s0 = _mm256_setzero_si256(), s1 = s0, s2 = s0, s3 = s0;
      for (int s = 0; s < 4; ++s) {
        const __m256i xl = _mm256_set1_epi32(xb[s]), xh = _mm256_set1_epi32(xb[4 + s]);
        Q4Step(p + 64 * s, xl, xh, &s0, &s1);
        asm("" : "+x"(s0), "+x"(s1));  // chains, as in BlockSumsAvx2
        if constexpr (NG == 2) {
          Q4Step(p2 + 64 * s, xl, xh, &s2, &s3);
          asm("" : "+x"(s2), "+x"(s3));
        }
      }
      const __m256i corr = _mm256_set1_epi32(a.corr[b]);
      i0 = _mm256_add_epi32(corr, _mm256_madd_epi16(s0, ones));
      i1 = _mm256_add_epi32(corr, _mm256_madd_epi16(s1, ones));
      if constexpr (NG == 2) {
        i2 = _mm256_add_epi32(corr, _mm256_madd_epi16(s2, ones));
        i3 = _mm256_add_epi32(corr, _mm256_madd_epi16(s3, ones));
      }
    }
    const __m256 dx = _mm256_set1_ps(a.dx[b]);
    if constexpr (kMins) {
      const int64_t sub = b % kU, us = QuantInterleaved::UnitScalesOffset(kT, b / kU);
      if (sub == 0) {
        ss = LoadSuperScales(grp + us);
        if constexpr (NG == 2) ss2 = LoadSuperScales(grp2 + us);
      }
      const __m256 xs = _mm256_set1_ps(a.xs[b]);
      FoldBlockMins(i0, i1, grp + us + 16 * sub, ss, dx, xs, &acc0, &acc1);
      if constexpr (NG == 2) FoldBlockMins(i2, i3, grp2 + us + 16 * sub, ss2, dx, xs, &acc2, &acc3);
    } else {
      const int64_t sc = QuantInterleaved::ScalesOffset(kT, b);
      acc0 = FoldBlock(i0, grp + sc, dx, acc0);
      acc1 = FoldBlock(i1, grp + sc + 16, dx, acc1);
      if constexpr (NG == 2) {
        acc2 = FoldBlock(i2, grp2 + sc, dx, acc2);
        acc3 = FoldBlock(i3, grp2 + sc + 16, dx, acc3);
      }
    }
  }
  StoreRows8(acc0, y, g * kRows, pk.rows());
  StoreRows8(acc1, y, g * kRows + 8, pk.rows());
  if constexpr (NG == 2) {
    StoreRows8(acc2, y2, g2 * kRows, pk2.rows());
    StoreRows8(acc3, y2, g2 * kRows + 8, pk2.rows());
  }
}

