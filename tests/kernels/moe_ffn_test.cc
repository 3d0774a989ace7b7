// MoeFfn against MoeFfnRef (token by token, weights dequantized exactly, double accumulation)
// over a sweep of weight dtypes, shapes, expert counts, top-k and token counts, and over the
// choice patterns that stress the grouping: every token a different expert, every token the
// same expert, and experts no token chose; with and without the kernels' prepared copies, at
// every ISA level this CPU has.
//
// Tolerance, per token: ||got - ref||_2 <= tol · ||ref||_2 + 1e-30, tol = 1e-5 for f32 and f16
// weights (f32 products) and 3e-2 for the quantized types, whose kernels quantize the
// activations to int8 twice (into gate/up and into down, ~1% each). A wrong expert, weight or
// token gives an error of the order of the result itself.
#include "kernels/moe_ffn.h"

#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <numeric>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "base/thread_pool.h"
#include "kernels/prepared_weights.h"
#include "kernel_test_util.h"

namespace tarmac::kernels {
namespace {


enum class Pattern { kRandom, kAllSame, kAllDifferent, kSomeUnused };

const char* PatternName(Pattern p) {
  switch (p) {
    case Pattern::kRandom: return "random";
    case Pattern::kAllSame: return "all-same";
    case Pattern::kAllDifferent: return "all-different";
    case Pattern::kSomeUnused: return "some-unused";
  }
  return "?";
}

// A layer's experts: views of random matrices (made once per dtype and shape, then shared by
// the cases: drawing them is most of the test's time) and the case's prepared copies.
struct Experts {
  std::vector<MatrixView> gate, up, down;
  PreparedWeights prepared;
  ExpertWeights View() const { return {gate, up, down}; }
};

const std::vector<std::vector<uint8_t>>& RandomExperts(DType t, int64_t n_expert, int64_t cols,
                                                       int64_t ff, std::mt19937& rng) {
  static std::map<std::tuple<DType, int64_t, int64_t, int64_t>, std::vector<std::vector<uint8_t>>>
      made;
  auto& m = made[{t, n_expert, cols, ff}];
  // Gaussian rows quantized as a model file's are (random block bits would give rows whose
  // dots cancel to a small part of their terms, which no relative bound fits; the kernels'
  // own tests cover those bit patterns).
  auto matrix = [&](int64_t rows, int64_t n) {
    std::vector<uint8_t> out(rows * RowBytes(t, n));
    std::normal_distribution<float> nd(0.0f, 0.05f);
    std::vector<float> row(n);
    for (int64_t r = 0; r < rows; ++r) {
      for (float& v : row) v = nd(rng);
      EXPECT_TRUE(QuantizeRowRef(t, row.data(), &out[r * RowBytes(t, n)], n).ok());
    }
    return out;
  };
  if (m.empty()) {
    for (int64_t e = 0; e < n_expert; ++e) {
      m.push_back(matrix(ff, cols));
      m.push_back(matrix(ff, cols));
      m.push_back(matrix(cols, ff));
    }
  }
  return m;
}

void MakeExperts(DType t, int64_t n_expert, int64_t cols, int64_t ff, std::mt19937& rng,
                 bool prepare, Experts* x) {
  const auto& bytes = RandomExperts(t, n_expert, cols, ff, rng);
  for (int64_t e = 0; e < n_expert; ++e) {
    x->gate.push_back(MatrixView::Dense(t, bytes[3 * e].data(), ff, cols));
    x->up.push_back(MatrixView::Dense(t, bytes[3 * e + 1].data(), ff, cols));
    x->down.push_back(MatrixView::Dense(t, bytes[3 * e + 2].data(), cols, ff));
  }
  if (!prepare) return;
  std::vector<MatrixView*> all;
  for (int64_t e = 0; e < n_expert; ++e) {
    all.push_back(&x->gate[e]);
    all.push_back(&x->up[e]);
    all.push_back(&x->down[e]);
  }
  x->prepared.Prepare(all, {});
}

// ids/weights [n][k] following the pattern; weights positive, summing to 1 per token.
void MakeChoices(Pattern p, int64_t n, int64_t k, int64_t n_expert, std::mt19937& rng,
                 std::vector<int32_t>* ids, std::vector<float>* weights) {
  ids->resize(n * k);
  weights->resize(n * k);
  std::vector<int32_t> perm(n_expert);
  std::iota(perm.begin(), perm.end(), 0);
  // kSomeUnused draws from the first half only.
  const int64_t pool = p == Pattern::kSomeUnused ? std::max<int64_t>(k, n_expert / 2) : n_expert;
  for (int64_t t = 0; t < n; ++t) {
    if (p == Pattern::kAllSame) {
      std::iota(perm.begin(), perm.end(), 0);  // every token the same k experts
    } else if (p == Pattern::kAllDifferent) {
      for (int64_t j = 0; j < n_expert; ++j) perm[j] = static_cast<int32_t>((t * k + j) % n_expert);
    } else {
      std::iota(perm.begin(), perm.end(), 0);
      std::shuffle(perm.begin(), perm.begin() + pool, rng);
    }
    std::uniform_real_distribution<float> u(0.1f, 1.0f);
    float sum = 0;
    for (int64_t j = 0; j < k; ++j) {
      (*ids)[t * k + j] = perm[j];
      sum += (*weights)[t * k + j] = u(rng);
    }
    for (int64_t j = 0; j < k; ++j) (*weights)[t * k + j] /= sum;
  }
}

double Tolerance(DType t) {
  return t == DType::kF32 || t == DType::kF16 || t == DType::kBF16 ? 1e-5 : 3e-2;
}

void CheckCase(DType t, int64_t n_expert, int64_t k, int64_t cols, int64_t ff, int64_t n,
               Pattern p, bool prepare, ThreadPool* pool, std::mt19937& rng) {
  Experts x;
  MakeExperts(t, n_expert, cols, ff, rng, prepare, &x);
  std::vector<int32_t> ids;
  std::vector<float> weights;
  MakeChoices(p, n, k, n_expert, rng, &ids, &weights);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::vector<float> in(n * cols);
  for (float& v : in) v = nd(rng);
  const ExpertChoices c{ids.data(), weights.data(), k};
  std::vector<float> ref(n * cols), got(n * cols, 123.0f);
  MoeFfnRef(x.View(), in.data(), n, c, GluKind::kSwiGlu, ref.data());
  MoeScratch scratch;
  MoeFfn(x.View(), in.data(), n, c, GluKind::kSwiGlu, got.data(), &scratch, pool);
  for (int64_t tok = 0; tok < n; ++tok) {
    double err = 0, norm = 0;
    for (int64_t i = 0; i < cols; ++i) {
      const double d = got[tok * cols + i] - ref[tok * cols + i];
      err += d * d;
      norm += static_cast<double>(ref[tok * cols + i]) * ref[tok * cols + i];
    }
    ASSERT_LE(std::sqrt(err), Tolerance(t) * std::sqrt(norm) + 1e-30)
        << DTypeName(t) << " experts " << n_expert << " k " << k << " cols " << cols << " ff "
        << ff << " tokens " << n << " " << PatternName(p) << (prepare ? " prepared" : "")
        << " token " << tok;
  }
}

TEST(MoeFfnTest, MatchesReferenceAcrossTypesShapesAndChoices) {
  std::mt19937 rng(52);
  ThreadPool pool(2);
  const DType types[] = {DType::kF32, DType::kF16,  DType::kQ8_0, DType::kQ4_0,
                         DType::kQ4_K, DType::kQ6_K, DType::kQ5_K, DType::kMXFP4};
  struct Shape {
    int64_t n_expert, k, cols, ff;
  };
  const Shape shapes[] = {{1, 1, 256, 256}, {4, 2, 256, 512}, {8, 3, 512, 256}, {16, 4, 256, 256}};
  // Token counts (one decode token, a verify-sized batch, past the 16-token row kernels) with
  // the patterns, with and without prepared copies.
  struct Batch {
    int64_t n;
    Pattern p;
    bool prepare;
  };
  const Batch batches[] = {{1, Pattern::kRandom, false},      {1, Pattern::kRandom, true},
                           {5, Pattern::kAllSame, false},     {5, Pattern::kSomeUnused, true},
                           {17, Pattern::kAllDifferent, true}, {17, Pattern::kSomeUnused, false},
                           {40, Pattern::kRandom, true},      {40, Pattern::kAllSame, false}};
  // Every combination at the active level; at each lower level (the paths a CPU without this
  // one's features takes) every type over one shape.
  const Isa top = ActiveIsa();
  testing::ForEachIsa([&](const char* isa) {
    SCOPED_TRACE(isa);
    const bool full = ActiveIsa() == top;
    for (DType t : types) {
      for (const Shape& s : shapes) {
        if (!full && s.n_expert != 8) continue;
        for (const Batch& b : batches) {
          if (!full && b.p != Pattern::kRandom) continue;
          CheckCase(t, s.n_expert, s.k, s.cols, s.ff, b.n, b.p, b.prepare, &pool, rng);
          if (HasFatalFailure()) return;
        }
      }
    }
  });
}

TEST(MoeFfnTest, BiasesAndGeGlu) {
  std::mt19937 rng(7);
  ThreadPool pool(2);
  const int64_t n_expert = 4, k = 2, cols = 256, ff = 256, n = 9;
  Experts x;
  MakeExperts(DType::kF32, n_expert, cols, ff, rng, /*prepare=*/false, &x);
  std::normal_distribution<float> nd(0.0f, 0.5f);
  std::vector<float> gb(n_expert * ff), ub(n_expert * ff), db(n_expert * cols), in(n * cols);
  for (auto* v : {&gb, &ub, &db, &in})
    for (float& f : *v) f = nd(rng);
  ExpertWeights w = x.View();
  w.gate_bias = gb.data(), w.up_bias = ub.data(), w.down_bias = db.data();
  std::vector<int32_t> ids;
  std::vector<float> weights;
  MakeChoices(Pattern::kRandom, n, k, n_expert, rng, &ids, &weights);
  const ExpertChoices c{ids.data(), weights.data(), k};
  for (GluKind glu : {GluKind::kSwiGlu, GluKind::kGeGlu}) {
    std::vector<float> ref(n * cols), got(n * cols);
    MoeFfnRef(w, in.data(), n, c, glu, ref.data());
    MoeScratch scratch;
    MoeFfn(w, in.data(), n, c, glu, got.data(), &scratch, &pool);
    for (int64_t i = 0; i < n * cols; ++i) {
      ASSERT_NEAR(got[i], ref[i], 1e-4 * (1 + std::fabs(ref[i]))) << "element " << i;
    }
  }
}

}  // namespace
}  // namespace tarmac::kernels
