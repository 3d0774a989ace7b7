#include "kernels/moe_ffn.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "kernels/matmul.h"
#include "kernels/ops_ref.h"

namespace tarmac::kernels {
namespace {

void CheckChoices(const ExpertWeights& w, int64_t n_tokens, const ExpertChoices& c) {
  TARMAC_CHECK(c.k >= 1 && c.k <= w.n_expert());
  TARMAC_CHECK(w.up.size() == w.gate.size() && w.down.size() == w.gate.size());
  for (int64_t i = 0; i < n_tokens * c.k; ++i) {
    TARMAC_CHECK(c.ids[i] >= 0 && c.ids[i] < w.n_expert());
  }
}

// Groups the slots t * k + j by expert (counting sort, stable: tokens in batch order).
void GroupByExpert(const ExpertChoices& c, int64_t n_tokens, int64_t n_expert, MoeScratch* s) {
  s->offsets.assign(static_cast<size_t>(n_expert + 1), 0);
  for (int64_t i = 0; i < n_tokens * c.k; ++i) ++s->offsets[c.ids[i] + 1];
  for (int64_t e = 0; e < n_expert; ++e) s->offsets[e + 1] += s->offsets[e];
  s->order.resize(static_cast<size_t>(n_tokens * c.k));
  s->next.assign(s->offsets.begin(), s->offsets.end() - 1);
  for (int64_t i = 0; i < n_tokens * c.k; ++i) {
    s->order[s->next[c.ids[i]]++] = static_cast<int32_t>(i);
  }
}

template <class V>
void Grow(V* v, int64_t n) {
  if (static_cast<int64_t>(v->size()) < n) v->resize(static_cast<size_t>(n));
}

}  // namespace

void MoeFfn(const ExpertWeights& w, const float* x, int64_t n_tokens, const ExpertChoices& c,
            GluKind glu, float* y, MoeScratch* s, ThreadPool* pool) {
  const int64_t cols = w.cols(), ff = w.ff(), n_expert = w.n_expert();
  CheckChoices(w, n_tokens, c);
  std::memset(y, 0, sizeof(float) * static_cast<size_t>(n_tokens * cols));
  if (n_tokens == 0) return;
  GroupByExpert(c, n_tokens, n_expert, s);
  for (int64_t e = 0; e < n_expert; ++e) {
    const int32_t begin = s->offsets[e], end = s->offsets[e + 1];
    const int64_t m = end - begin;  // tokens that chose e
    if (m == 0) continue;
    Grow(&s->x, m * cols);
    Grow(&s->gate, m * ff);
    Grow(&s->up, m * ff);
    Grow(&s->out, m * cols);
    for (int64_t i = 0; i < m; ++i) {
      const int64_t t = s->order[begin + i] / c.k;
      std::memcpy(&s->x[i * cols], x + t * cols, sizeof(float) * static_cast<size_t>(cols));
    }
    if (w.gate_bias == nullptr && w.up_bias == nullptr) {
      MatMulGlu(w.gate[e], w.up[e], s->x.data(), m, glu, s->gate.data(), s->up.data(), pool);
    } else {
      const MatrixView* ws[2] = {&w.gate[e], &w.up[e]};
      float* ys[2] = {s->gate.data(), s->up.data()};
      MatMulShared(ws, ys, 2, s->x.data(), m, pool);
      for (int64_t i = 0; i < m; ++i) {
        float* g = &s->gate[i * ff];
        float* u = &s->up[i * ff];
        if (w.gate_bias != nullptr) Add(g, w.gate_bias + e * ff, g, ff);
        if (w.up_bias != nullptr) Add(u, w.up_bias + e * ff, u, ff);
        ApplyGlu(glu, g, u, g, ff);
      }
    }
    MatMul(w.down[e], s->gate.data(), m, s->out.data(), pool);
    // Scatter-add, each token's rows in increasing expert order (e ascends).
    for (int64_t i = 0; i < m; ++i) {
      const int32_t slot = s->order[begin + i];
      const int64_t t = slot / c.k;
      float* o = &s->out[i * cols];
      if (w.down_bias != nullptr) Add(o, w.down_bias + e * cols, o, cols);
      Axpy(c.weights[slot], o, y + t * cols, cols);
    }
  }
}

void MoeFfnRef(const ExpertWeights& w, const float* x, int64_t n_tokens, const ExpertChoices& c,
               GluKind glu, float* y) {
  const int64_t cols = w.cols(), ff = w.ff();
  CheckChoices(w, n_tokens, c);
  std::vector<float> g(ff), u(ff), h(ff), o(cols);
  for (int64_t t = 0; t < n_tokens; ++t) {
    std::vector<double> acc(cols, 0.0);
    // Increasing expert order, as MoeFfn adds them.
    std::vector<int64_t> slots(c.k);
    for (int64_t j = 0; j < c.k; ++j) slots[j] = t * c.k + j;
    std::sort(slots.begin(), slots.end(), [&](int64_t a, int64_t b) { return c.ids[a] < c.ids[b]; });
    for (int64_t slot : slots) {
      const int32_t e = c.ids[slot];
      MatMulRef(w.gate[e], x + t * cols, 1, g.data());
      MatMulRef(w.up[e], x + t * cols, 1, u.data());
      for (int64_t i = 0; i < ff; ++i) {
        if (w.gate_bias != nullptr) g[i] += w.gate_bias[e * ff + i];
        if (w.up_bias != nullptr) u[i] += w.up_bias[e * ff + i];
      }
      if (glu == GluKind::kSwiGlu) {
        ref::SwiGlu(g.data(), u.data(), h.data(), ff);
      } else if (glu == GluKind::kGeGlu) {
        ref::GeGlu(g.data(), u.data(), h.data(), ff);
      } else {
        ref::SwiGluOai(g.data(), u.data(), h.data(), ff);
      }
      MatMulRef(w.down[e], h.data(), 1, o.data());
      for (int64_t i = 0; i < cols; ++i) {
        const double b = w.down_bias != nullptr ? w.down_bias[e * cols + i] : 0.0;
        acc[i] += static_cast<double>(c.weights[slot]) * (o[i] + b);
      }
    }
    for (int64_t i = 0; i < cols; ++i) y[t * cols + i] = static_cast<float>(acc[i]);
  }
}

}  // namespace tarmac::kernels
