// Reference quantizers of the grid types (quant_grid_types.h). Not llama.cpp's algorithm, but
// its block layouts exactly (quant_grid_blocks.h), so any GGUF reader decodes what these write.
//
// Per super-block of 256 weights:
//  1. Signs. IQ2_XXS, IQ2_XS and IQ3_XXS store 7 sign bits per 8 weights with even parity; when
//     a group has an odd number of negatives, the weight of smallest w*x^2 takes the wrong sign,
//     and its target magnitude becomes -|x| (the grid then picks the smallest magnitude for it).
//     IQ2_S and IQ3_S store all 8 signs; the IQ1 grids are signed, so their target is x itself.
//  2. For each grid cell (8 weights, 4 for IQ3) and each codebook vector k, the weighted sums
//     A_k = sum w v^2 and B_k = sum w v t, so that the error of vector k under any scale s is
//     s^2 A_k - 2 s B_k plus a constant: every later trial is a scan of two arrays.
//  3. Each sub-block's real-valued scale: a sweep of candidates around max|t| / max|v|, each
//     followed by a least-squares refit (s = sum B / sum A over the vectors it chose).
//  4. The f16 super-block scale d from a few candidates that map the largest sub-block scale onto
//     one of the top codes, d rounded up so that no sub-block code overflows; under each, every
//     sub-block tries the codes nearest its scale with a fresh codebook scan, and the candidate
//     of least total error wins.
// The search runs on each block divided by its largest magnitude (sums stay in range, the fit is
// scale-invariant); the error weights are the importance, when given, times rms + |x|.
// Exhaustive codebook scans: the objective is correctness and a good fit, not speed.
//
// Pure functions, thread-safe (the codebook layouts are built once, on first use). Errors: a
// super-block scale beyond the f16 range (InvalidArgument naming the type and block).
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include "tensor/fp16.h"
#include "tensor/quant_grid_blocks.h"
#include "tensor/quant_grid_tables.h"
#include "tensor/quant_grid_types.h"

namespace tarmac::quant_grid {
namespace {

constexpr int kMaxUnits = 16;  // sub-block scales per super-block (one per 16 weights at most)
constexpr int kMaxCells = 64;  // grid cells per super-block (4 weights each at most)
constexpr int kScaleCandidates = 12;

// A codebook laid out for the scans: value j of vector k at v[j * size + k].
struct Book {
  int dim = 0;
  int size = 0;
  float vmax = 0.0f;  // largest |value|, to place the first scale guesses
  std::vector<float> v, v2;
};

// dim values per entry from the grid bytes. IQ1 (signed): entries [0, n) are the grid plus
// kIq1Delta and [n, 2n) the grid minus it, so a search over both picks the delta sign too.
template <typename T, size_t N>
Book MakeBook(const T (&grid)[N], int dim, bool iq1) {
  Book b;
  b.dim = dim;
  b.size = static_cast<int>(iq1 ? 2 * N : N);
  b.v.resize(static_cast<size_t>(dim) * b.size);
  for (int k = 0; k < b.size; ++k) {
    const uint64_t entry = grid[k % N];
    for (int j = 0; j < dim; ++j) {
      const uint8_t byte = GridByte(entry, j);
      float val = byte;
      if (iq1) val = static_cast<int8_t>(byte) + (k < static_cast<int>(N) ? kIq1Delta : -kIq1Delta);
      b.v[static_cast<size_t>(j) * b.size + k] = val;
      b.vmax = std::max(b.vmax, std::fabs(val));
    }
  }
  b.v2.resize(b.v.size());
  for (size_t i = 0; i < b.v.size(); ++i) b.v2[i] = b.v[i] * b.v[i];
  return b;
}

// How one type's scales work.
struct Scheme {
  const char* name;
  const Book* book;
  int unit_cells;      // grid cells sharing one sub-block scale
  int levels;          // sub-block scale codes 0 .. levels-1
  bool half_per_unit;  // IQ1_S: one delta sign per sub-block, i.e. one half of the book
  float (*sub_scale)(float d, int s);  // the decoder's expression for the scale of code s
};

// A super-block's choices: f16 d, a code per sub-block, a book entry per grid cell.
struct Choice {
  uint16_t d = 0;
  int s[kMaxUnits] = {};
  int k[kMaxCells] = {};
};

class Searcher {
 public:
  explicit Searcher(const Scheme& scheme)
      : sc_(scheme),
        size_(scheme.book->size),
        cells_(kBlockSize / scheme.book->dim),
        units_(cells_ / scheme.unit_cells),
        a_(static_cast<size_t>(cells_) * size_),
        b_(a_.size()) {}

  // t: targets, w: weights (kBlockSize each), both of a block divided by its largest magnitude
  // amax. Errors: d beyond the f16 range.
  Status Run(const float* t, const float* w, float amax, int64_t block, Choice* out) {
    Tabulate(t, w);
    float sigma[kMaxUnits];
    float max_sigma = 0.0f;
    for (int u = 0; u < units_; ++u) {
      sigma[u] = UnitScale(u, t);
      max_sigma = std::max(max_sigma, sigma[u]);
    }
    // d = 0 decodes to zeros, of error 0 on the scale FitCodes reports: a trial must beat it.
    *out = Choice();
    if (!(max_sigma > 0.0f)) return Status::Ok();
    float best = 0.0f;
    Choice trial;
    for (int m = sc_.levels - 1; m >= std::max(0, sc_.levels - 4); --m) {
      const float want = max_sigma * amax / sc_.sub_scale(1.0f, m);
      uint16_t h = F32ToF16(want);
      if (F16ToF32(h) < want) ++h;  // round up: the largest sub-block then needs a code <= m
      if ((h & 0x7FFF) >= 0x7C00) {
        return InvalidArgument("{} block {}: super-block scale {} does not fit an f16", sc_.name,
                               block, want);
      }
      trial.d = h;
      const float total = FitCodes(F16ToF32(h) / amax, sigma, &trial);
      if (total < best) {
        best = total;
        *out = trial;
      }
    }
    return Status::Ok();
  }

 private:
  // a_/b_[cell * size + k] = sum over the cell's weights of w v^2 and w v t for vector k.
  void Tabulate(const float* t, const float* w) {
    const int dim = sc_.book->dim;
    for (int c = 0; c < cells_; ++c) {
      float* a = &a_[static_cast<size_t>(c) * size_];
      float* b = &b_[static_cast<size_t>(c) * size_];
      std::fill(a, a + size_, 0.0f);
      std::fill(b, b + size_, 0.0f);
      for (int j = 0; j < dim; ++j) {
        const float wj = w[c * dim + j], wtj = wj * t[c * dim + j];
        const float* v = &sc_.book->v[static_cast<size_t>(j) * size_];
        const float* v2 = &sc_.book->v2[static_cast<size_t>(j) * size_];
        for (int k = 0; k < size_; ++k) {
          a[k] += wj * v2[k];
          b[k] += wtj * v[k];
        }
      }
    }
  }

  // The book range unit-level choice h allows: the whole book, or its half h.
  void Range(int h, int* lo, int* hi) const {
    *lo = sc_.half_per_unit ? h * size_ / 2 : 0;
    *hi = sc_.half_per_unit ? (h + 1) * size_ / 2 : size_;
  }

  // Over the cells of unit u, the entry of [lo, hi) of least error under scale s (into k), and
  // the sums of A and B of those entries. Returns the summed error less its constant part.
  float ScanUnit(int u, float s, int lo, int hi, int* k, float* sa, float* sb) const {
    float err = 0.0f;
    *sa = 0.0f;
    *sb = 0.0f;
    for (int c = u * sc_.unit_cells; c < (u + 1) * sc_.unit_cells; ++c) {
      const float* a = &a_[static_cast<size_t>(c) * size_];
      const float* b = &b_[static_cast<size_t>(c) * size_];
      const float s2 = s * s, two_s = 2.0f * s;
      float best = std::numeric_limits<float>::infinity();
      int arg = lo;
      for (int e = lo; e < hi; ++e) {
        const float d = s2 * a[e] - two_s * b[e];
        if (d < best) {
          best = d;
          arg = e;
        }
      }
      k[c] = arg;
      err += best;
      *sa += a[arg];
      *sb += b[arg];
    }
    return err;
  }

  // The real-valued scale of unit u that fits its targets best (0 when there is nothing to
  // fit): a candidate sweep, each candidate refit twice by least squares.
  float UnitScale(int u, const float* t) const {
    const int dim = sc_.book->dim, first = u * sc_.unit_cells * dim;
    float tmax = 0.0f;
    for (int i = first; i < first + sc_.unit_cells * dim; ++i) {
      tmax = std::max(tmax, std::fabs(t[i]));
    }
    if (!(tmax > 0.0f)) return 0.0f;
    int k[kMaxCells];
    float best_score = 0.0f, best = 0.0f;
    for (int h = 0; h < (sc_.half_per_unit ? 2 : 1); ++h) {
      int lo, hi;
      Range(h, &lo, &hi);
      for (int c = 0; c < kScaleCandidates; ++c) {
        float s = (0.5f + 0.8f * c / (kScaleCandidates - 1)) * tmax / sc_.book->vmax;
        for (int iter = 0; iter < 2; ++iter) {
          float sa, sb;
          ScanUnit(u, s, lo, hi, k, &sa, &sb);
          if (!(sa > 0.0f) || !(sb > 0.0f)) break;
          // The error after the refit is const - sb^2 / sa: larger is better.
          const float score = sb * sb / sa;
          if (score > best_score) {
            best_score = score;
            best = sb / sa;
          }
          s = sb / sa;
        }
      }
    }
    return best;
  }

  // With super-block scale d: each unit's code among the three nearest its scale sigma[u] (and
  // its half of the book), each cell's entry; returns the total error less its constant part.
  float FitCodes(float d, const float* sigma, Choice* out) const {
    float total = 0.0f;
    int k[kMaxCells];
    for (int u = 0; u < units_; ++u) {
      int nearest = 0;
      for (int s = 1; s < sc_.levels; ++s) {
        if (std::fabs(sc_.sub_scale(d, s) - sigma[u]) <
            std::fabs(sc_.sub_scale(d, nearest) - sigma[u])) {
          nearest = s;
        }
      }
      float best = std::numeric_limits<float>::infinity();
      for (int s = std::max(0, nearest - 1); s <= std::min(sc_.levels - 1, nearest + 1); ++s) {
        for (int h = 0; h < (sc_.half_per_unit ? 2 : 1); ++h) {
          int lo, hi;
          Range(h, &lo, &hi);
          float sa, sb;
          const float err = ScanUnit(u, sc_.sub_scale(d, s), lo, hi, k, &sa, &sb);
          if (err < best) {
            best = err;
            out->s[u] = s;
            for (int c = u * sc_.unit_cells; c < (u + 1) * sc_.unit_cells; ++c) out->k[c] = k[c];
          }
        }
      }
      total += best;
    }
    return total;
  }

  const Scheme& sc_;
  const int size_, cells_, units_;
  std::vector<float> a_, b_;
};

enum class SignMode { kParity7, kAll8, kSigned };

// For a block x already divided by its largest magnitude: the targets t the grid vectors should
// match, the error weights w, and per group of 8 the sign byte to store (bit j: weight j decodes
// negative; kParity7 leaves bit 7 implied by parity).
void Prepare(const float* x, const float* importance, SignMode mode, float* t, float* w,
             uint8_t* signs) {
  float sum2 = 0.0f, imp_max = 0.0f;
  for (int i = 0; i < kBlockSize; ++i) sum2 += x[i] * x[i];
  if (importance != nullptr) {
    for (int i = 0; i < kBlockSize; ++i) imp_max = std::max(imp_max, importance[i]);
  }
  // All-zero importance says nothing: weigh as without. Dividing by the largest keeps the sums
  // of the search in range whatever the importance's magnitude.
  const float inv_imp = imp_max > 0.0f ? 1.0f / imp_max : 0.0f;
  // Larger weights count more, but small ones are not ignored: rms keeps every weight in play.
  const float rms = std::sqrt(sum2 / kBlockSize);
  for (int i = 0; i < kBlockSize; ++i) {
    w[i] = (imp_max > 0.0f ? importance[i] * inv_imp : 1.0f) * (rms + std::fabs(x[i]));
  }
  for (int g = 0; g < kBlockSize / 8; ++g) {
    const float* xg = x + 8 * g;
    float* tg = t + 8 * g;
    uint8_t s = 0;
    for (int j = 0; j < 8; ++j) {
      tg[j] = mode == SignMode::kSigned ? xg[j] : std::fabs(xg[j]);
      if (xg[j] < 0.0f) s |= static_cast<uint8_t>(1 << j);
    }
    if (mode == SignMode::kParity7 && (std::popcount(static_cast<unsigned>(s)) & 1) != 0) {
      int jmin = 0;
      for (int j = 1; j < 8; ++j) {
        if (w[8 * g + j] * xg[j] * xg[j] < w[8 * g + jmin] * xg[jmin] * xg[jmin]) jmin = j;
      }
      s ^= static_cast<uint8_t>(1 << jmin);
      tg[jmin] = -tg[jmin];
    }
    signs[g] = mode == SignMode::kParity7 ? (s & 127) : s;
  }
}

float Iq2Scale(float d, int s) { return d * (0.5f + s) * 0.25f; }
float Iq3xxsScale(float d, int s) { return d * (0.5f + s) * 0.5f; }
float Iq3sScale(float d, int s) { return d * (1 + 2 * s); }
float Iq1Scale(float d, int s) { return d * (2 * s + 1); }

const Book& Iq2xxsBook() {
  static const Book b = MakeBook(kIq2xxsGrid, 8, false);
  return b;
}
const Book& Iq2xsBook() {
  static const Book b = MakeBook(kIq2xsGrid, 8, false);
  return b;
}
const Book& Iq2sBook() {
  static const Book b = MakeBook(kIq2sGrid, 8, false);
  return b;
}
const Book& Iq3xxsBook() {
  static const Book b = MakeBook(kIq3xxsGrid, 4, false);
  return b;
}
const Book& Iq3sBook() {
  static const Book b = MakeBook(kIq3sGrid, 4, false);
  return b;
}
const Book& Iq1Book() {
  static const Book b = MakeBook(kIq1sGrid, 8, true);
  return b;
}

// Runs the search on every block of x and hands each block's choices to pack(i, choice, signs).
template <typename Pack>
Status QuantizeBlocks(const Scheme& scheme, SignMode mode, const float* x, int64_t nb,
                      const float* importance, Pack pack) {
  Searcher searcher(scheme);
  float xn[kBlockSize], t[kBlockSize], w[kBlockSize];
  uint8_t signs[kBlockSize / 8];
  Choice choice;
  for (int64_t i = 0; i < nb; ++i) {
    // The search runs on the block divided by its largest magnitude: its float sums can neither
    // overflow nor underflow, and it is exactly scale-invariant.
    const float* xb = x + i * kBlockSize;
    float amax = 0.0f;
    for (int j = 0; j < kBlockSize; ++j) amax = std::max(amax, std::fabs(xb[j]));
    // Below the smallest normal float, far below any f16 scale: the block is stored as zeros.
    const float inv = amax >= std::numeric_limits<float>::min() ? 1.0f / amax : 0.0f;
    for (int j = 0; j < kBlockSize; ++j) xn[j] = xb[j] * inv;
    const float* imp = importance != nullptr ? importance + i * kBlockSize : nullptr;
    Prepare(xn, imp, mode, t, w, signs);
    const Status st = searcher.Run(t, w, amax, i, &choice);
    if (!st.ok()) return st;
    pack(i, choice, signs);
  }
  return Status::Ok();
}

}  // namespace

Status QuantizeIQ2_XXS(const float* x, void* y, int64_t nb, const float* importance) {
  const Scheme scheme{"IQ2_XXS", &Iq2xxsBook(), 4, 16, false, Iq2Scale};
  auto* out = static_cast<BlockIQ2_XXS*>(y);
  return QuantizeBlocks(scheme, SignMode::kParity7, x, nb, importance,
                        [&](int64_t i, const Choice& c, const uint8_t* signs) {
                          BlockIQ2_XXS& b = out[i];
                          b.d = c.d;
                          for (int sb = 0; sb < 8; ++sb) {
                            uint32_t idx = 0, meta = static_cast<uint32_t>(c.s[sb]) << 28;
                            for (int g = 0; g < 4; ++g) {
                              idx |= static_cast<uint32_t>(c.k[4 * sb + g]) << (8 * g);
                              meta |= static_cast<uint32_t>(signs[4 * sb + g]) << (7 * g);
                            }
                            b.qs[4 * sb + 0] = static_cast<uint16_t>(idx);
                            b.qs[4 * sb + 1] = static_cast<uint16_t>(idx >> 16);
                            b.qs[4 * sb + 2] = static_cast<uint16_t>(meta);
                            b.qs[4 * sb + 3] = static_cast<uint16_t>(meta >> 16);
                          }
                        });
}

Status QuantizeIQ2_XS(const float* x, void* y, int64_t nb, const float* importance) {
  const Scheme scheme{"IQ2_XS", &Iq2xsBook(), 2, 16, false, Iq2Scale};
  auto* out = static_cast<BlockIQ2_XS*>(y);
  return QuantizeBlocks(scheme, SignMode::kParity7, x, nb, importance,
                        [&](int64_t i, const Choice& c, const uint8_t* signs) {
                          BlockIQ2_XS& b = out[i];
                          b.d = c.d;
                          for (int g = 0; g < 32; ++g) {
                            b.qs[g] = static_cast<uint16_t>(c.k[g] | (signs[g] << 9));
                          }
                          for (int sb = 0; sb < 8; ++sb) {
                            b.scales[sb] =
                                static_cast<uint8_t>(c.s[2 * sb] | (c.s[2 * sb + 1] << 4));
                          }
                        });
}

Status QuantizeIQ2_S(const float* x, void* y, int64_t nb, const float* importance) {
  const Scheme scheme{"IQ2_S", &Iq2sBook(), 2, 16, false, Iq2Scale};
  auto* out = static_cast<BlockIQ2_S*>(y);
  return QuantizeBlocks(scheme, SignMode::kAll8, x, nb, importance,
                        [&](int64_t i, const Choice& c, const uint8_t* signs) {
                          BlockIQ2_S& b = out[i];
                          std::memset(&b, 0, sizeof(b));
                          b.d = c.d;
                          for (int g = 0; g < 32; ++g) {
                            b.qs[g] = static_cast<uint8_t>(c.k[g] & 255);
                            b.qs[32 + g] = signs[g];
                            b.qh[g / 4] |= static_cast<uint8_t>((c.k[g] >> 8) << (2 * (g % 4)));
                          }
                          for (int sb = 0; sb < 8; ++sb) {
                            b.scales[sb] =
                                static_cast<uint8_t>(c.s[2 * sb] | (c.s[2 * sb + 1] << 4));
                          }
                        });
}

Status QuantizeIQ3_XXS(const float* x, void* y, int64_t nb, const float* importance) {
  const Scheme scheme{"IQ3_XXS", &Iq3xxsBook(), 8, 16, false, Iq3xxsScale};
  auto* out = static_cast<BlockIQ3_XXS*>(y);
  return QuantizeBlocks(scheme, SignMode::kParity7, x, nb, importance,
                        [&](int64_t i, const Choice& c, const uint8_t* signs) {
                          BlockIQ3_XXS& b = out[i];
                          b.d = c.d;
                          for (int cell = 0; cell < 64; ++cell) {
                            b.qs[cell] = static_cast<uint8_t>(c.k[cell]);
                          }
                          for (int sb = 0; sb < 8; ++sb) {
                            uint32_t meta = static_cast<uint32_t>(c.s[sb]) << 28;
                            for (int g = 0; g < 4; ++g) {
                              meta |= static_cast<uint32_t>(signs[4 * sb + g]) << (7 * g);
                            }
                            std::memcpy(b.qs + 64 + 4 * sb, &meta, 4);
                          }
                        });
}

Status QuantizeIQ3_S(const float* x, void* y, int64_t nb, const float* importance) {
  const Scheme scheme{"IQ3_S", &Iq3sBook(), 8, 16, false, Iq3sScale};
  auto* out = static_cast<BlockIQ3_S*>(y);
  return QuantizeBlocks(scheme, SignMode::kAll8, x, nb, importance,
                        [&](int64_t i, const Choice& c, const uint8_t* signs) {
                          BlockIQ3_S& b = out[i];
                          std::memset(&b, 0, sizeof(b));
                          b.d = c.d;
                          for (int cell = 0; cell < 64; ++cell) {
                            b.qs[cell] = static_cast<uint8_t>(c.k[cell] & 255);
                            b.qh[cell / 8] |= static_cast<uint8_t>((c.k[cell] >> 8) << (cell % 8));
                          }
                          std::memcpy(b.signs, signs, 32);
                          for (int sb = 0; sb < 8; ++sb) {
                            b.scales[sb / 2] |= static_cast<uint8_t>(c.s[sb] << (4 * (sb % 2)));
                          }
                        });
}

Status QuantizeIQ1_S(const float* x, void* y, int64_t nb, const float* importance) {
  const Scheme scheme{"IQ1_S", &Iq1Book(), 4, 8, true, Iq1Scale};
  auto* out = static_cast<BlockIQ1_S*>(y);
  return QuantizeBlocks(scheme, SignMode::kSigned, x, nb, importance,
                        [&](int64_t i, const Choice& c, const uint8_t*) {
                          BlockIQ1_S& b = out[i];
                          b.d = c.d;
                          for (int sb = 0; sb < 8; ++sb) {
                            // Entries past 2047 are the grid with the negative delta.
                            int qh = (c.s[sb] << 12) | ((c.k[4 * sb] >= 2048 ? 1 : 0) << 15);
                            for (int g = 0; g < 4; ++g) {
                              const int idx = c.k[4 * sb + g] & 2047;
                              b.qs[4 * sb + g] = static_cast<uint8_t>(idx & 255);
                              qh |= (idx >> 8) << (3 * g);
                            }
                            b.qh[sb] = static_cast<uint16_t>(qh);
                          }
                        });
}

Status QuantizeIQ1_M(const float* x, void* y, int64_t nb, const float* importance) {
  const Scheme scheme{"IQ1_M", &Iq1Book(), 2, 8, false, Iq1Scale};
  auto* out = static_cast<BlockIQ1_M*>(y);
  return QuantizeBlocks(scheme, SignMode::kSigned, x, nb, importance,
                        [&](int64_t i, const Choice& c, const uint8_t*) {
                          BlockIQ1_M& b = out[i];
                          std::memset(&b, 0, sizeof(b));
                          uint16_t sc[4] = {};
                          for (int g = 0; g < 32; ++g) {
                            const int idx = c.k[g] & 2047, negative = c.k[g] >= 2048 ? 1 : 0;
                            b.qs[g] = static_cast<uint8_t>(idx & 255);
                            const int nibble = (idx >> 8) | (negative << 3);
                            b.qh[g / 2] |= static_cast<uint8_t>(nibble << (4 * (g % 2)));
                          }
                          for (int sb = 0; sb < 8; ++sb) {
                            const int shift = 6 * (sb % 2);
                            sc[sb / 2] |= static_cast<uint16_t>((c.s[2 * sb] << shift) |
                                                                (c.s[2 * sb + 1] << (shift + 3)));
                          }
                          for (int n = 0; n < 4; ++n) {
                            sc[n] |= static_cast<uint16_t>(((c.d >> (4 * n)) & 0xF) << 12);
                          }
                          std::memcpy(b.scales, sc, 8);
                        });
}

}  // namespace tarmac::quant_grid
