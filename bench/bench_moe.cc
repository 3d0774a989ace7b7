// One mixture-of-experts feed-forward layer (kernels/moe_ffn.h) of Qwen3-30B-A3B's shape (dim
// 2048, 128 experts of width 768, 8 per token) at 1, 4, 16 and 512 tokens, against the dense
// feed-forward that reads the same bytes: width = (experts the batch chose) × 768, over the
// same tokens. The MoE runs each chosen expert over its own tokens; the dense layer is one
// MatMulGlu + MatMul. Weights in Q4_0 or Q8_0 with the interleaved copies the model prepares
// (kernels/prepared_weights.h), random blocks; routing uniform at random (each token 8
// distinct experts), fixed per token count.
//
//   build/bin/bench_moe [--benchmark_filter=...]
// Counters: experts (the batch's union), bytes/s of expert weights read.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <memory>
#include <numeric>
#include <random>
#include <vector>

#include "base/thread_pool.h"
#include "kernels/matmul.h"
#include "kernels/moe_ffn.h"
#include "kernels/prepared_weights.h"
#include "tensor/aligned_buffer.h"
#include "tensor/fp16.h"
#include "tensor/quant_blocks.h"

namespace tarmac::kernels {
namespace {

constexpr int64_t kDim = 2048, kFf = 768, kExperts = 128, kUsed = 8;

// Random Q4_0 / Q8_0 blocks with a sane scale (quantized weights of stddev ~0.02).
void FillBlocks(DType t, uint8_t* dst, int64_t bytes, uint64_t seed) {
  std::mt19937_64 rng(seed);
  const int64_t block = t == DType::kQ4_0 ? sizeof(BlockQ4_0) : sizeof(BlockQ8_0);
  for (int64_t off = 0; off + block <= bytes; off += block) {
    uint8_t* b = dst + off;
    for (int64_t i = 2; i < block; i += 8) {
      const uint64_t r = rng();
      std::memcpy(b + i, &r, std::min<int64_t>(8, block - i));
    }
    const uint16_t d = F32ToF16(t == DType::kQ4_0 ? 0.005f : 0.0003f);
    std::memcpy(b, &d, 2);
  }
}

// The layer's experts (or a dense layer of `width`): [width x kDim] gate/up, [kDim x width]
// down, prepared as the model prepares them.
struct Layer {
  AlignedVector<uint8_t> bytes;
  std::vector<MatrixView> gate, up, down;
  PreparedWeights prepared;

  Layer(DType t, int64_t n, int64_t width) {
    const int64_t in_bytes = RowBytes(t, kDim) * width, out_bytes = RowBytes(t, width) * kDim;
    bytes.resize(static_cast<size_t>(n * (2 * in_bytes + out_bytes)));
    FillBlocks(t, bytes.data(), static_cast<int64_t>(bytes.size()), 52);
    uint8_t* p = bytes.data();
    for (int64_t e = 0; e < n; ++e) {
      gate.push_back(MatrixView::Dense(t, p, width, kDim));
      up.push_back(MatrixView::Dense(t, p + in_bytes, width, kDim));
      down.push_back(MatrixView::Dense(t, p + 2 * in_bytes, kDim, width));
      p += 2 * in_bytes + out_bytes;
    }
    std::vector<MatrixView*> all;
    for (int64_t e = 0; e < n; ++e) {
      for (MatrixView* m : {&gate[e], &up[e], &down[e]}) all.push_back(m);
    }
    prepared.Prepare(all, {.release_source = true});
  }
};

Layer& Experts(DType t) {
  static std::map<DType, std::unique_ptr<Layer>> layers;
  auto& l = layers[t];
  if (!l) l = std::make_unique<Layer>(t, kExperts, kFf);
  return *l;
}

// Each token's 8 distinct experts, uniform at random; equal weights.
void Route(int64_t tokens, std::vector<int32_t>* ids, std::vector<float>* weights) {
  std::mt19937 rng(static_cast<uint32_t>(tokens));
  std::vector<int32_t> perm(kExperts);
  ids->clear();
  for (int64_t t = 0; t < tokens; ++t) {
    std::iota(perm.begin(), perm.end(), 0);
    std::shuffle(perm.begin(), perm.end(), rng);
    ids->insert(ids->end(), perm.begin(), perm.begin() + kUsed);
  }
  weights->assign(ids->size(), 1.0f / kUsed);
}

int64_t Union(const std::vector<int32_t>& ids) {
  std::vector<bool> seen(kExperts, false);
  for (int32_t e : ids) seen[e] = true;
  return std::count(seen.begin(), seen.end(), true);
}

std::vector<float> Activations(int64_t n) {
  std::mt19937 rng(7);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::vector<float> x(n);
  for (float& v : x) v = nd(rng);
  return x;
}

void Counters(benchmark::State& state, DType t, int64_t experts) {
  const double bytes = static_cast<double>(experts) *
                       (2.0 * RowBytes(t, kDim) * kFf + static_cast<double>(RowBytes(t, kFf)) * kDim);
  state.counters["experts"] = static_cast<double>(experts);
  state.counters["bytes/s"] = benchmark::Counter(bytes, benchmark::Counter::kIsIterationInvariantRate);
  state.SetLabel(std::string(DTypeName(t)));
}

// args: dtype, tokens, threads
void BM_MoeLayer(benchmark::State& state) {
  const auto t = static_cast<DType>(state.range(0));
  const int64_t tokens = state.range(1);
  ThreadPool pool(static_cast<int>(state.range(2)));
  Layer& l = Experts(t);
  std::vector<int32_t> ids;
  std::vector<float> weights;
  Route(tokens, &ids, &weights);
  const auto x = Activations(tokens * kDim);
  std::vector<float> y(tokens * kDim);
  MoeScratch scratch;
  const ExpertWeights w{l.gate, l.up, l.down};
  for (auto _ : state) {
    MoeFfn(w, x.data(), tokens, {ids.data(), weights.data(), kUsed}, GluKind::kSwiGlu, y.data(),
           &scratch, &pool);
    benchmark::DoNotOptimize(y.data());
  }
  Counters(state, t, Union(ids));
}

// The dense feed-forward reading the same bytes (width = union × 768), same tokens.
void BM_DenseSameBytes(benchmark::State& state) {
  const auto t = static_cast<DType>(state.range(0));
  const int64_t tokens = state.range(1);
  ThreadPool pool(static_cast<int>(state.range(2)));
  std::vector<int32_t> ids;
  std::vector<float> weights;
  Route(tokens, &ids, &weights);
  const int64_t experts = Union(ids), width = experts * kFf;
  Layer dense(t, 1, width);
  const auto x = Activations(tokens * kDim);
  std::vector<float> gate(tokens * width), up(tokens * width), y(tokens * kDim);
  for (auto _ : state) {
    MatMulGlu(dense.gate[0], dense.up[0], x.data(), tokens, GluKind::kSwiGlu, gate.data(),
              up.data(), &pool);
    MatMul(dense.down[0], gate.data(), tokens, y.data(), &pool);
    benchmark::DoNotOptimize(y.data());
  }
  Counters(state, t, experts);
}

void Args(benchmark::internal::Benchmark* b) {
  for (DType t : {DType::kQ4_0, DType::kQ8_0}) {
    for (int64_t tokens : {1, 4, 16, 512}) {
      for (int64_t threads : {1, 2}) b->Args({static_cast<int64_t>(t), tokens, threads});
    }
  }
  b->ArgNames({"dtype", "tokens", "threads"})->UseRealTime()->Unit(benchmark::kMillisecond);
}

BENCHMARK(BM_MoeLayer)->Apply(Args);
BENCHMARK(BM_DenseSameBytes)->Apply(Args);

}  // namespace
}  // namespace tarmac::kernels

BENCHMARK_MAIN();
