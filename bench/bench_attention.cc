// Attention at long context: the paged, tiled online-softmax kernel (PagedAttentionTile)
// against a naive version that materialises the score matrix, on the attention shape of the
// llama-3.2-1b make-random preset (32 query heads, 8 KV heads, head dim 64), f16 K/V.
//   BM_Decode{Tiled,Naive}/T   one query token at position T-1 (all heads)
//   BM_Prefill{Tiled,Naive}/T  all T query tokens of one KV group (4 query heads), causal
// Counters: scratch_bytes is the working memory besides K/V and Q/O: the tiled kernel's
// per-thread scratch is O(block_size · head_dim) regardless of T; the naive one holds T scores
// (decode) or T×T (prefill) per head.
#include <benchmark/benchmark.h>

#include <cmath>
#include <random>
#include <vector>

#include "kernels/attention.h"
#include "tensor/fp16.h"

namespace tarmac::kernels {
namespace {

constexpr int kHeads = 32, kKvHeads = 8, kHeadDim = 64, kBlock = 16;

struct Setup {
  explicit Setup(int64_t T) : T(T) {
    const int64_t n_blocks = (T + kBlock - 1) / kBlock;
    k.resize(n_blocks * kKvHeads * kBlock * kHeadDim);
    v.resize(k.size());
    std::mt19937 rng(1);
    std::normal_distribution<float> nd(0.0f, 1.0f);
    for (auto& x : k) x = F32ToF16(nd(rng));
    for (auto& x : v) x = F32ToF16(nd(rng));
    for (int64_t b = 0; b < n_blocks; ++b) table.push_back(static_cast<int32_t>((b * 37) % n_blocks));
    view.k = k.data();
    view.v = v.data();
    view.n_kv_heads = kKvHeads;
    view.block_size = kBlock;
    view.head_dim = kHeadDim;
  }
  float Kf(int64_t pos, int head, int d) const {
    return F16ToF32(view.KRows(table[pos / kBlock], head)[d * kBlock + pos % kBlock]);  // K is [hd][bs]
  }
  float Vf(int64_t pos, int head, int d) const {
    return F16ToF32(view.VRows(table[pos / kBlock], head)[(pos % kBlock) * kHeadDim + d]);
  }
  int64_t T;
  std::vector<uint16_t> k, v;
  std::vector<int32_t> table;
  PagedKvView view;
};

// Naive: K and V gathered through the block table into contiguous f32 once per call, then
// for each query head the scores against positions [0, n) are materialised, softmaxed and
// used to weight V (plain loops the compiler vectorises).
struct Dense {
  std::vector<float> k, v;  // [T][kKvHeads][kHeadDim]
  void Gather(const Setup& s, int64_t n) {
    k.resize(n * kKvHeads * kHeadDim);
    v.resize(k.size());
    for (int64_t j = 0; j < n; ++j)
      for (int h = 0; h < kKvHeads; ++h)
        for (int i = 0; i < kHeadDim; ++i) {
          k[(j * kKvHeads + h) * kHeadDim + i] = s.Kf(j, h, i);
          v[(j * kKvHeads + h) * kHeadDim + i] = s.Vf(j, h, i);
        }
  }
};

void NaiveOne(const Dense& kv, const float* q, int head, int64_t n, float scale, float* scores,
              float* out) {
  const int kvh = head / (kHeads / kKvHeads);
  float mx = -INFINITY;
  for (int64_t j = 0; j < n; ++j) {
    const float* kj = kv.k.data() + (j * kKvHeads + kvh) * kHeadDim;
    float d = 0;
    for (int i = 0; i < kHeadDim; ++i) d += q[i] * kj[i];
    scores[j] = d * scale;
    mx = std::max(mx, scores[j]);
  }
  float z = 0;
  for (int64_t j = 0; j < n; ++j) z += (scores[j] = std::exp(scores[j] - mx));
  for (int i = 0; i < kHeadDim; ++i) out[i] = 0;
  for (int64_t j = 0; j < n; ++j) {
    const float p = scores[j] / z;
    const float* vj = kv.v.data() + (j * kKvHeads + kvh) * kHeadDim;
    for (int i = 0; i < kHeadDim; ++i) out[i] += p * vj[i];
  }
}

void BM_DecodeTiled(benchmark::State& state) {
  Setup s(state.range(0));
  std::vector<float> q(kHeads * kHeadDim, 0.1f), out(q.size());
  for (auto _ : state) {
    for (int g = 0; g < kKvHeads; ++g)
      PagedAttentionTile(q.data(), kHeads * kHeadDim, 1, s.T - 1, kHeads, g, s.view,
                         s.table.data(), 0.125f, out.data(), kHeads * kHeadDim);
    benchmark::DoNotOptimize(out.data());
  }
  state.counters["scratch_bytes"] = 4.0 * (kBlock * kHeadDim * 3 + kBlock + 4 * kHeadDim);
}

void BM_DecodeNaive(benchmark::State& state) {
  Setup s(state.range(0));
  std::vector<float> q(kHeads * kHeadDim, 0.1f), out(q.size());
  std::vector<float> scores(s.T);  // materialised: one score per position
  Dense kv;
  for (auto _ : state) {
    kv.Gather(s, s.T);
    for (int h = 0; h < kHeads; ++h)
      NaiveOne(kv, q.data() + h * kHeadDim, h, s.T, 0.125f, scores.data(), out.data() + h * kHeadDim);
    benchmark::DoNotOptimize(out.data());
  }
  state.counters["scratch_bytes"] = 4.0 * s.T * (1 + 2 * kKvHeads * kHeadDim);
}

// Prefill of every position for one KV group (heads 0..3), as the model runs it: tiles of 32.
void BM_PrefillTiled(benchmark::State& state) {
  Setup s(state.range(0));
  const int64_t stride = kHeads * kHeadDim;
  std::vector<float> q(s.T * stride, 0.1f), out(q.size());
  for (auto _ : state) {
    for (int64_t t = 0; t < s.T; t += 32)
      PagedAttentionTile(q.data() + t * stride, stride, static_cast<int32_t>(std::min<int64_t>(32, s.T - t)), t,
                         kHeads, 0, s.view, s.table.data(), 0.125f, out.data() + t * stride, stride);
    benchmark::DoNotOptimize(out.data());
  }
  state.counters["scratch_bytes"] = 4.0 * (kBlock * kHeadDim * 3 + kBlock + 32 * 4 * (kHeadDim + 2));
}

void BM_PrefillNaive(benchmark::State& state) {
  Setup s(state.range(0));
  const int64_t stride = kHeads * kHeadDim;
  std::vector<float> q(s.T * stride, 0.1f), out(q.size());
  // Materialised causal score matrix of one head: T × T.
  std::vector<float> scores(static_cast<size_t>(s.T) * s.T);
  Dense kv;
  for (auto _ : state) {
    kv.Gather(s, s.T);
    for (int h = 0; h < 4; ++h) {
      for (int64_t t = 0; t < s.T; ++t)
        NaiveOne(kv, q.data() + t * stride + h * kHeadDim, h, t + 1, 0.125f,
                 scores.data() + t * s.T, out.data() + t * stride + h * kHeadDim);
    }
    benchmark::DoNotOptimize(scores.data());
  }
  state.counters["scratch_bytes"] = 4.0 * s.T * (s.T + 2 * kKvHeads * kHeadDim);
}

// wp-11m's prefix-cache hit (6 query heads, 2 KV heads, head dim 64, blocks of 16): the last
// Q query tokens of a 416-token prompt, in tiles of 32 (the model's), both KV heads: one
// layer's attention.
void BM_Wp11mPrefixHit(benchmark::State& state) {
  const int heads = 6, kv_heads = 2, hd = 64, bs = 16, ctx = 416;
  const int nq = static_cast<int>(state.range(0));
  const int n_blocks = ctx / bs;
  std::vector<uint16_t> k(static_cast<size_t>(n_blocks) * kv_heads * bs * hd), v(k.size());
  std::mt19937 rng(2);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  for (auto& x : k) x = F32ToF16(nd(rng));
  for (auto& x : v) x = F32ToF16(nd(rng));
  std::vector<int32_t> table;
  for (int b = 0; b < n_blocks; ++b) table.push_back((b * 7) % n_blocks);
  PagedKvView view{k.data(), v.data(), kv_heads, bs, hd};
  const int64_t stride = heads * hd;
  std::vector<float> q(nq * stride), out(q.size());
  for (auto& x : q) x = nd(rng);
  for (auto _ : state) {
    for (int t = 0; t < nq; t += 32)
      for (int g = 0; g < kv_heads; ++g)
        PagedAttentionTile(q.data() + t * stride, stride, std::min(32, nq - t), ctx - nq + t,
                           heads, g, view, table.data(), 0.125f, out.data() + t * stride, stride);
    benchmark::DoNotOptimize(out.data());
  }
}

BENCHMARK(BM_Wp11mPrefixHit)->Arg(32)->Arg(416)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_DecodeTiled)->Arg(1024)->Arg(4096)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_DecodeNaive)->Arg(1024)->Arg(4096)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_PrefillTiled)->Arg(1024)->Arg(4096)->Unit(benchmark::kMillisecond)->Iterations(1);
BENCHMARK(BM_PrefillNaive)->Arg(1024)->Arg(4096)->Unit(benchmark::kMillisecond)->Iterations(1);

}  // namespace
}  // namespace tarmac::kernels

BENCHMARK_MAIN();
