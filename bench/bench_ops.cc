// Row kernels of kernels/ops.h against their scalar references, at the sizes a Llama-class
// forward pass uses (hidden 4096, FFN 11008, vocab 32000, 32 heads × 128). Compare the
// fast/ref pairs of one run; absolute numbers depend on the (shared, noisy) machine.
// Items = elements processed; bytes = row bytes read + written.

#include <benchmark/benchmark.h>

#include <cstdint>
#include <random>
#include <vector>

#include "kernels/ops.h"
#include "kernels/ops_ref.h"

namespace tarmac::kernels {
namespace {

std::vector<float> Random(int64_t n, float scale) {
  std::mt19937 rng(42);
  std::uniform_real_distribution<float> dist(-scale, scale);
  std::vector<float> v(static_cast<size_t>(n));
  for (auto& x : v) x = dist(rng);
  return v;
}

template <void (*F)(const float*, const float*, int64_t, float, float*)>
void BM_RmsNorm(benchmark::State& state) {
  const int64_t n = state.range(0);
  const auto x = Random(n, 3.0f), w = Random(n, 1.0f);
  std::vector<float> out(n);
  for (auto _ : state) {
    F(x.data(), w.data(), n, 1e-5f, out.data());
    benchmark::DoNotOptimize(out.data());
  }
  state.SetItemsProcessed(state.iterations() * n);
  state.SetBytesProcessed(state.iterations() * n * 12);
}
BENCHMARK(BM_RmsNorm<RmsNorm>)->Arg(4096);
BENCHMARK(BM_RmsNorm<ref::RmsNorm>)->Arg(4096);

template <void (*F)(float*, int64_t)>
void BM_Softmax(benchmark::State& state) {
  const int64_t n = state.range(0);
  const auto x = Random(n, 10.0f);
  std::vector<float> y(n);
  for (auto _ : state) {
    y = x;  // softmax is in place; the copy is part of the measured time for both
    F(y.data(), n);
    benchmark::DoNotOptimize(y.data());
  }
  state.SetItemsProcessed(state.iterations() * n);
}
BENCHMARK(BM_Softmax<Softmax>)->Arg(512)->Arg(32000);
BENCHMARK(BM_Softmax<ref::Softmax>)->Arg(512)->Arg(32000);

template <void (*F)(const float*, const float*, float*, int64_t)>
void BM_SwiGlu(benchmark::State& state) {
  const int64_t n = state.range(0);
  const auto g = Random(n, 6.0f), u = Random(n, 2.0f);
  std::vector<float> out(n);
  for (auto _ : state) {
    F(g.data(), u.data(), out.data(), n);
    benchmark::DoNotOptimize(out.data());
  }
  state.SetItemsProcessed(state.iterations() * n);
}
BENCHMARK(BM_SwiGlu<SwiGlu>)->Arg(11008);
BENCHMARK(BM_SwiGlu<ref::SwiGlu>)->Arg(11008);

void BM_ArgMax(benchmark::State& state) {
  const int64_t n = state.range(0);
  const auto x = Random(n, 10.0f);
  for (auto _ : state) benchmark::DoNotOptimize(ArgMax(x.data(), n));
  state.SetItemsProcessed(state.iterations() * n);
}
void BM_ArgMaxRef(benchmark::State& state) {
  const int64_t n = state.range(0);
  const auto x = Random(n, 10.0f);
  for (auto _ : state) benchmark::DoNotOptimize(ref::ArgMax(x.data(), n));
  state.SetItemsProcessed(state.iterations() * n);
}
BENCHMARK(BM_ArgMax)->Arg(32000);
BENCHMARK(BM_ArgMaxRef)->Arg(32000);

void BM_Dot(benchmark::State& state) {
  const int64_t n = state.range(0);
  const auto a = Random(n, 1.0f), b = Random(n, 1.0f);
  for (auto _ : state) benchmark::DoNotOptimize(DotF32(a.data(), b.data(), n));
  state.SetItemsProcessed(state.iterations() * n);
}
BENCHMARK(BM_Dot)->Arg(128)->Arg(4096);

template <void (*F)(const float*, uint16_t*, int64_t)>
void BM_ToF16(benchmark::State& state) {
  const int64_t n = state.range(0);
  const auto x = Random(n, 100.0f);
  std::vector<uint16_t> out(n);
  for (auto _ : state) {
    F(x.data(), out.data(), n);
    benchmark::DoNotOptimize(out.data());
  }
  state.SetItemsProcessed(state.iterations() * n);
  state.SetBytesProcessed(state.iterations() * n * 6);
}
BENCHMARK(BM_ToF16<ConvertF32ToF16>)->Arg(4096);
BENCHMARK(BM_ToF16<ref::ConvertF32ToF16>)->Arg(4096);

template <void (*F)(const uint16_t*, float*, int64_t)>
void BM_FromF16(benchmark::State& state) {
  const int64_t n = state.range(0);
  std::vector<uint16_t> in(n);
  for (int64_t i = 0; i < n; ++i) in[i] = static_cast<uint16_t>((i * 7919) & 0x7bff);
  std::vector<float> out(n);
  for (auto _ : state) {
    F(in.data(), out.data(), n);
    benchmark::DoNotOptimize(out.data());
  }
  state.SetItemsProcessed(state.iterations() * n);
  state.SetBytesProcessed(state.iterations() * n * 6);
}
BENCHMARK(BM_FromF16<ConvertF16ToF32>)->Arg(4096);
BENCHMARK(BM_FromF16<ref::ConvertF16ToF32>)->Arg(4096);

// One token's Q (32 heads × 128): cached SIMD vs the uncached double-precision path.
void BM_RopeCached(benchmark::State& state) {
  const auto type = state.range(0) == 0 ? RopeType::kNorm : RopeType::kNeox;
  const RopeCache cache(type, 128, 4096, 10000.0f, 1.0f, nullptr);
  auto x = Random(32 * 128, 1.0f);
  int64_t pos = 0;
  for (auto _ : state) {
    cache.Apply(x.data(), 32, 128, pos);
    pos = (pos + 1) & 4095;
    benchmark::DoNotOptimize(x.data());
  }
  state.SetItemsProcessed(state.iterations() * 32 * 128);
}
void BM_RopeUncached(benchmark::State& state) {
  const bool norm = state.range(0) == 0;
  auto x = Random(32 * 128, 1.0f);
  int64_t pos = 0;
  for (auto _ : state) {
    (norm ? RopeNorm : RopeNeox)(x.data(), 32, 128, 128, pos, 10000.0f, 1.0f, nullptr, 1.0f);
    pos = (pos + 1) & 4095;
    benchmark::DoNotOptimize(x.data());
  }
  state.SetItemsProcessed(state.iterations() * 32 * 128);
}
BENCHMARK(BM_RopeCached)->Arg(0)->Arg(1);
BENCHMARK(BM_RopeUncached)->Arg(0)->Arg(1);

}  // namespace
}  // namespace tarmac::kernels

BENCHMARK_MAIN();
