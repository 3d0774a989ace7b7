// Bandwidth and throughput of the dot/matvec/matmul kernels, with their yardsticks measured
// in the same run (the machine is shared and noisy, so only side-by-side ratios mean much):
//   BM_Triad       STREAM-like a[i] = b[i] + s·c[i] over 1 GiB f32 arrays (≫ L3), via ThreadPool;
//                  counter GB/s counts 12 bytes per element (2 reads + 1 write, STREAM's rule).
//   BM_ReadBW      read-only bandwidth (u64 sum over the 2 GiB b, c arrays), same threads.
//   BM_MatVec      y = W·x for W of ≥ 1.5 GiB per dtype (≫ L3); counter GB/s = weight bytes
//                  read per second (bench/run_kernel_bench.sh divides its median by the
//                  triad median at the same thread count).
//   BM_MatMul      Y = X·Wᵀ, 512 tokens, f32/f16/q8_0/q4_0 weights (+ q4_K on 2048×2048), LLM
//                  shapes (TinyLlama, Llama-3.2-1B MLP); GFLOP/s = 2·T·R·K / s. q8_0/q4_0 run the
//                  int8-activation GEMM (kernels/matmul_int8.h; its path is in the label).
//   BM_Sgemm       OpenBLAS cblas_sgemm on the same f32 shapes and thread count.
// Args: {threads}, {dtype, threads, bytes} or {dtype, rows, cols, threads}. Buffers are filled
// once and kept (see FillSaneBytes): ~4.8 GiB in all (3 GiB triad, 1.5 GiB matvec weights).
// Recommended: --benchmark_repetitions=5 --benchmark_enable_random_interleaving=true, so noise
// from other processes spreads evenly over the benchmarks being compared.

#include <benchmark/benchmark.h>

#include "kernels/x86_intrinsics.h"  // <immintrin.h>, its GCC 12 self-initialisation warnings off

#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <numeric>
#include <string>
#include <thread>
#include <vector>

#include "base/thread_pool.h"
#include "hwy/targets.h"
#include "kernels/matmul.h"
#include "kernels/matmul_amx.h"
#include "kernels/matmul_int8.h"
#include "kernels/matvec.h"
#include "kernels/matvec_int8.h"
#include "kernels/matvec_multi.h"
#include "kernels/matmul_q6k.h"
#include "kernels/matvec_q6k.h"
#include "kernels/prepared_weights.h"
#include "kernels/quant_interleaved.h"
#include "tensor/aligned_buffer.h"
#include "tensor/fp16.h"
#include "tensor/quant_blocks.h"
#include "tensor/view.h"

#ifdef TARMAC_HAVE_OPENBLAS
#include <cblas.h>
#endif

namespace tarmac::kernels {
namespace {

constexpr int64_t kGiB = int64_t{1} << 30;

uint64_t SplitMix(uint64_t& s) {
  uint64_t z = (s += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

// Fills [p, p + bytes) with random bytes in 0x30..0x37, in parallel. Read as any weight dtype
// this is harmless data: every f32, f16 and bf16 value is a normal number (1e-9..0.25), every
// quant block scale is a sane half, so no Inf/NaN or subnormal products (microcode assists
// would measure the wrong thing). One buffer thus serves every dtype, and every benchmark's
// data stays resident: repetitions can be interleaved (--benchmark_enable_random_interleaving)
// without refilling gigabytes.
void FillSaneBytes(uint8_t* p, int64_t bytes) {
  ThreadPool pool(ThreadPool::DefaultThreads());
  const int64_t words = bytes / 8;
  pool.ParallelFor(words, int64_t{1} << 20, [&](int64_t w0, int64_t w1, int) {
    uint64_t seed = 0x1234567 + w0;
    for (int64_t w = w0; w < w1; ++w) {
      const uint64_t v = (SplitMix(seed) & 0x0707070707070707ull) + 0x3030303030303030ull;
      std::memcpy(p + 8 * w, &v, 8);
    }
  });
  for (int64_t i = words * 8; i < bytes; ++i) p[i] = 0x30;
}

// A lazily allocated, filled, then kept buffer of `bytes` (one per key).
uint8_t* KeptBuffer(const std::string& key, int64_t bytes) {
  static std::map<std::string, AlignedBuffer> buffers;
  auto it = buffers.find(key);
  if (it == buffers.end() || static_cast<int64_t>(it->second.size()) < bytes) {
    AlignedBuffer buf(bytes);
    FillSaneBytes(buf.data(), bytes);
    it = buffers.insert_or_assign(key, std::move(buf)).first;
  }
  return it->second.data();
}

// ---------------------------------------------------------------- triad
constexpr int64_t kTriadN = kGiB / 4;  // floats per array: 1 GiB each

void BM_Triad(benchmark::State& state) {
  const int threads = static_cast<int>(state.range(0));
  ThreadPool pool(threads);
  float* a = reinterpret_cast<float*>(KeptBuffer("triad", 3 * kTriadN * sizeof(float)));
  float* b = a + kTriadN;
  float* c = b + kTriadN;
  const int64_t grain = int64_t{1} << 22;
  pool.ParallelFor(kTriadN, grain, [&](int64_t i0, int64_t i1, int) {
    for (int64_t i = i0; i < i1; ++i) b[i] = 1.0f, c[i] = 2.0f;
  });
  const float s = 3.0f;
  for (auto _ : state) {
    pool.ParallelFor(kTriadN, grain, [&](int64_t i0, int64_t i1, int) {
      for (int64_t i = i0; i < i1; ++i) a[i] = b[i] + s * c[i];
    });
    benchmark::ClobberMemory();
  }
  const double bytes = 12.0 * kTriadN;
  state.counters["GB"] =
      benchmark::Counter(bytes / 1e9, benchmark::Counter::kIsIterationInvariantRate);
  state.counters["threads"] = threads;
}

// Sum of u64 words [w, w + n): the widest loads the CPU has (AVX-512, AVX2) and four
// independent sums (a narrow loop keeps too few cache misses in flight to measure DRAM
// bandwidth). No software prefetch: this is what the hardware streams on its own.
__attribute__((target("avx2"))) uint64_t SumWordsAvx2(const uint64_t* w, int64_t n) {
  __m256i s0 = _mm256_setzero_si256(), s1 = s0, s2 = s0, s3 = s0;
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    s0 = _mm256_add_epi64(s0, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w + i)));
    s1 = _mm256_add_epi64(s1, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w + i + 4)));
    s2 = _mm256_add_epi64(s2, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w + i + 8)));
    s3 = _mm256_add_epi64(s3, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w + i + 12)));
  }
  alignas(32) uint64_t lanes[4];
  _mm256_store_si256(reinterpret_cast<__m256i*>(lanes),
                     _mm256_add_epi64(_mm256_add_epi64(s0, s1), _mm256_add_epi64(s2, s3)));
  uint64_t s = lanes[0] + lanes[1] + lanes[2] + lanes[3];
  for (; i < n; ++i) s += w[i];
  return s;
}
__attribute__((target("avx512f"))) uint64_t SumWordsAvx512(const uint64_t* w, int64_t n) {
  __m512i s0 = _mm512_setzero_si512(), s1 = s0, s2 = s0, s3 = s0;
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    s0 = _mm512_add_epi64(s0, _mm512_loadu_si512(w + i));
    s1 = _mm512_add_epi64(s1, _mm512_loadu_si512(w + i + 8));
    s2 = _mm512_add_epi64(s2, _mm512_loadu_si512(w + i + 16));
    s3 = _mm512_add_epi64(s3, _mm512_loadu_si512(w + i + 24));
  }
  uint64_t s = _mm512_reduce_add_epi64(_mm512_add_epi64(_mm512_add_epi64(s0, s1),
                                                        _mm512_add_epi64(s2, s3)));
  for (; i < n; ++i) s += w[i];
  return s;
}
uint64_t SumWords(const uint64_t* w, int64_t n) {
  static const bool avx512 = __builtin_cpu_supports("avx512f");
  static const bool avx2 = __builtin_cpu_supports("avx2");
  if (avx512) return SumWordsAvx512(w, n);
  if (avx2) return SumWordsAvx2(w, n);
  uint64_t s = 0;
  for (int64_t i = 0; i < n; ++i) s += w[i];
  return s;
}

// Read-only bandwidth: sums the 2 GiB b and c arrays of the triad buffer as u64 words. A
// stricter yardstick for matvec than the triad, which also writes (and, with write-allocate,
// moves 16 B per element while STREAM's rule counts 12).
void BM_ReadBW(benchmark::State& state) {
  const int threads = static_cast<int>(state.range(0));
  ThreadPool pool(threads);
  const auto* base = KeptBuffer("triad", 3 * kTriadN * sizeof(float));
  const auto* words = reinterpret_cast<const uint64_t*>(base + kTriadN * sizeof(float));
  const int64_t n = 2 * kTriadN * sizeof(float) / 8;
  std::vector<uint64_t> partial(threads * 8);
  for (auto _ : state) {
    pool.ParallelFor(n, int64_t{1} << 21, [&](int64_t i0, int64_t i1, int t) {
      partial[t * 8] += SumWords(words + i0, i1 - i0);
    });
    benchmark::DoNotOptimize(partial.data());
  }
  state.counters["GB"] = benchmark::Counter(n * 8 / 1e9, benchmark::Counter::kIsIterationInvariantRate);
  state.counters["threads"] = threads;
}

// ---------------------------------------------------------------- matvec
constexpr int64_t kMatVecCols = 4096;
constexpr int64_t kMatVecBytes = 3 * kGiB / 2;

// A dense weight matrix of `type`, cols wide, with at least min_bytes (shared sane bytes).
MatrixView Weights(DType type, int64_t cols, int64_t min_bytes, const std::string& key) {
  const int64_t row_bytes = RowBytes(type, cols);
  const int64_t rows = (min_bytes + row_bytes - 1) / row_bytes;
  const int64_t max_row_bytes = cols * 4;  // f32, the widest type
  return MatrixView::Dense(type, KeptBuffer(key, min_bytes + max_row_bytes), rows, cols);
}

std::vector<float> RandomVector(int64_t n, uint64_t seed) {
  std::vector<float> v(n);
  for (auto& x : v) x = static_cast<float>(static_cast<int64_t>(SplitMix(seed) % 2001) - 1000) / 1000.0f;
  return v;
}

void BM_MatVec(benchmark::State& state) {
  const auto type = static_cast<DType>(state.range(0));
  const int threads = static_cast<int>(state.range(1));
  const int64_t min_bytes = state.range(2);
  ThreadPool pool(threads);
  MatrixView w = Weights(type, kMatVecCols, min_bytes, "matvec/" + std::to_string(min_bytes));
  const auto x = RandomVector(w.cols, 7);
  std::vector<float> y(w.rows);
  // range(3) == 1: the int8-activation VNNI kernel (Q8_0 / Q4_0) instead of MatVec's int16;
  // 2: the same on a QuantInterleaved copy (as the model loader makes); 3: Q6_K's int8 kernel.
  const bool int8 = state.range(3) == 1 || state.range(3) == 2;
  const bool q6k = state.range(3) == 3;
  std::unique_ptr<QuantInterleaved> pk;
  if (state.range(3) == 2) {
    pk = QuantInterleaved::Pack(w);
    w.prepared = pk.get();
  }
  for (auto _ : state) {
    if (int8) {
      MatVecInt8(w, x.data(), y.data(), &pool);
    } else if (q6k) {
      MatVecQ6K(w, x.data(), 1, y.data(), &pool);
    } else {
      MatVec(w, x.data(), y.data(), &pool);
    }
    benchmark::DoNotOptimize(y.data());
  }
  const double bytes = static_cast<double>(w.rows) * w.row_stride;
  state.counters["GB"] =
      benchmark::Counter(bytes / 1e9, benchmark::Counter::kIsIterationInvariantRate);
  state.counters["threads"] = threads;
  state.SetLabel(std::string(DTypeName(type)));
}

// A decode step's shape of work: MatVecInt8 over 64 distinct interleaved matrices of
// range(2) rows x 2048 columns in turn (q4_0: 151 MB at 2048 rows, past the L3), so each
// call's fixed costs (quantizing x, waking the pool, each chunk's prefetch warm-up, the
// last chunk's tail) count as in the model, unlike one 1.5 GiB matrix.
void BM_MatVecLayers(benchmark::State& state) {
  const auto type = static_cast<DType>(state.range(0));
  const int threads = static_cast<int>(state.range(1));
  const int64_t rows = state.range(2), cols = 2048, n = 64;
  ThreadPool pool(threads);
  const int64_t row_bytes = RowBytes(type, cols);
  const MatrixView all = Weights(type, cols, n * rows * row_bytes, "matvec-layers");
  std::vector<MatrixView> ws;
  std::vector<std::unique_ptr<QuantInterleaved>> pks;
  for (int64_t i = 0; i < n; ++i) {
    ws.push_back(MatrixView::Dense(type, all.row(i * rows), rows, cols));
    pks.push_back(QuantInterleaved::Pack(ws.back()));
    ws.back().prepared = pks.back().get();
  }
  const auto x = RandomVector(cols, 7);
  std::vector<float> y(rows);
  for (auto _ : state) {
    for (const MatrixView& w : ws) MatVecInt8(w, x.data(), y.data(), &pool);
    benchmark::DoNotOptimize(y.data());
  }
  state.counters["GB"] = benchmark::Counter(n * rows * row_bytes / 1e9,
                                            benchmark::Counter::kIsIterationInvariantRate);
  state.counters["threads"] = threads;
  state.SetLabel(std::string(DTypeName(type)));
}

// ---------------------------------------------------------------- matmul
constexpr int64_t kTokens = 512;

void SetFlops(benchmark::State& state, int64_t rows, int64_t cols, int threads) {
  state.counters["GFLOP/s"] = benchmark::Counter(2.0 * kTokens * rows * cols / 1e9,
                                                 benchmark::Counter::kIsIterationInvariantRate);
  state.counters["threads"] = threads;
}

void BM_MatMul(benchmark::State& state) {
  const auto type = static_cast<DType>(state.range(0));
  const int64_t rows = state.range(1), cols = state.range(2);
  const int threads = static_cast<int>(state.range(3));
  ThreadPool pool(threads);
  const MatrixView w = Weights(type, cols, rows * RowBytes(type, cols),
                              "matmul/" + std::to_string(rows) + "x" + std::to_string(cols));
  const auto x = RandomVector(kTokens * cols, 11);
  std::vector<float> y(kTokens * rows);
  for (auto _ : state) {
    MatMul(w, x.data(), kTokens, y.data(), &pool);
    benchmark::DoNotOptimize(y.data());
  }
  SetFlops(state, rows, cols, threads);
  std::string label(DTypeName(type));
  if (IsInt8MatMulType(type)) label += std::string(" int8 ") + Int8MatMulPath();
  state.SetLabel(label);
}

// The int8 GEMM (q8_0, 2048×2048, 1 thread) at prefill-chunk sizes: its per-call costs
// (activation quantization, weight packing) are amortized over fewer tokens.
void BM_MatMulTokens(benchmark::State& state) {
  const auto type = static_cast<DType>(state.range(0));
  const int64_t tokens = state.range(1), rows = 2048, cols = 2048;
  ThreadPool pool(1);
  const MatrixView w = Weights(type, cols, rows * RowBytes(type, cols), "matmul/2048x2048");
  const auto x = RandomVector(tokens * cols, 11);
  std::vector<float> y(tokens * rows);
  // range(2) == 1: MatVecMulti (int16 activations) whatever the dispatch table says, to
  // compare it with the kernel MatMul picks; 2: Q6_K's GEMM (MatMulQ6K) likewise.
  const bool multi = state.range(2) == 1, gemm = state.range(2) == 2;
  if (gemm && !MatMulQ6KAvailable()) {
    state.SkipWithError("MatMulQ6K needs AVX2");
    return;
  }
  for (auto _ : state) {
    if (multi) {
      MatVecMulti(w, x.data(), tokens, y.data(), &pool);
    } else if (gemm) {
      MatMulQ6K(w, x.data(), tokens, y.data(), &pool);
    } else {
      MatMul(w, x.data(), tokens, y.data(), &pool);
    }
    benchmark::DoNotOptimize(y.data());
  }
  state.counters["GFLOP/s"] = benchmark::Counter(2.0 * tokens * rows * cols / 1e9,
                                                 benchmark::Counter::kIsIterationInvariantRate);
  state.SetLabel(std::string(DTypeName(type)));
}

// A speculative-verify-shaped step: T tokens through a stack of FFN matrices shaped like
// the padded wp-11m blocks (gate/up 16384×384, down 384×16384, f16), ≫ L3 in all. The time
// per call against T = 1 is what a verify step costs over a decode step (the matrix part).
void BM_VerifyStack(benchmark::State& state) {
  const auto type = static_cast<DType>(state.range(0));
  const int64_t tokens = state.range(1);
  const int threads = static_cast<int>(state.range(2));
  constexpr int64_t kLayers = 24, kFfn = 16384, kEmbd = 384;
  ThreadPool pool(threads);
  const int64_t up_bytes = kFfn * RowBytes(type, kEmbd), down_bytes = kEmbd * RowBytes(type, kFfn);
  const int64_t layer_bytes = 2 * up_bytes + down_bytes;
  uint8_t* base = KeptBuffer("verify", kLayers * layer_bytes);
  const auto x = RandomVector(tokens * kFfn, 13);
  std::vector<float> y(tokens * kFfn);
  for (auto _ : state) {
    for (int64_t l = 0; l < kLayers; ++l) {
      uint8_t* p = base + l * layer_bytes;
      MatMul(MatrixView::Dense(type, p, kFfn, kEmbd), x.data(), tokens, y.data(), &pool);
      MatMul(MatrixView::Dense(type, p + up_bytes, kFfn, kEmbd), x.data(), tokens, y.data(),
             &pool);
      MatMul(MatrixView::Dense(type, p + 2 * up_bytes, kEmbd, kFfn), x.data(), tokens,
             y.data(), &pool);
    }
    benchmark::DoNotOptimize(y.data());
  }
  state.counters["GB"] = benchmark::Counter(kLayers * layer_bytes / 1e9,
                                            benchmark::Counter::kIsIterationInvariantRate);
  state.SetLabel(std::string(DTypeName(type)));
}

// The verify kernel on an L2-resident f16 matrix, 1 thread: its compute ceiling.
void BM_VerifyL2(benchmark::State& state) {
  const int64_t tokens = state.range(0), rows = state.range(1), cols = state.range(2);
  ThreadPool pool(1);
  const MatrixView w = Weights(DType::kF16, cols, rows * RowBytes(DType::kF16, cols), "vl2");
  const auto x = RandomVector(tokens * cols, 13);
  std::vector<float> y(tokens * rows);
  for (auto _ : state) {
    MatMul(MatrixView::Dense(DType::kF16, w.data, rows, cols), x.data(), tokens, y.data(), &pool);
    benchmark::DoNotOptimize(y.data());
  }
  state.counters["GB"] = benchmark::Counter(rows * cols * 2 / 1e9,
                                            benchmark::Counter::kIsIterationInvariantRate);
}

// A batched decode step's matmuls on wp-11m's shapes (6 layers: q 384x384, k/v 128x384,
// o 384x384, gate/up 1024x384, down 384x1024; f16), T tokens, with the copy the model makes at
// load for this CPU (arg 1 = 1: PreparedWeights, i.e. AMX tiles pre-split or the panel-order f16
// copy) or none (0: per-call packing). TARMAC_ISA picks the level.
void BM_Wp11mStep(benchmark::State& state) {
  const int64_t tokens = state.range(0);
  const bool packed = state.range(1) != 0;
  const int threads = static_cast<int>(state.range(2));
  ThreadPool pool(threads);
  const int64_t shapes[][2] = {{384, 384}, {128, 384}, {128, 384}, {384, 384},
                               {1024, 384}, {1024, 384}, {384, 1024}};
  // plain: the GGUF layout; prepared: the same matrices with the copies the model makes.
  static std::vector<MatrixView> plain, prepared;
  static std::vector<std::vector<uint8_t>> store;
  static PreparedWeights copies;
  if (plain.empty()) {
    for (int l = 0; l < 6; ++l) {
      for (const auto& sh : shapes) {
        store.emplace_back(sh[0] * RowBytes(DType::kF16, sh[1]));
        FillSaneBytes(store.back().data(), store.back().size());
        plain.push_back(MatrixView::Dense(DType::kF16, store.back().data(), sh[0], sh[1]));
      }
    }
    prepared = plain;
    std::vector<MatrixView*> ptrs;
    for (MatrixView& m : prepared) ptrs.push_back(&m);
    copies.Prepare(ptrs, {});
  }
  const auto x = RandomVector(tokens * 1024, 13);
  std::vector<float> y(tokens * 1024);
  double flops = 0;
  for (const MatrixView& w : plain) flops += 2.0 * tokens * w.rows * w.cols;
  for (auto _ : state) {
    for (const MatrixView& w : packed ? prepared : plain) {
      MatMul(w, x.data(), tokens, y.data(), &pool);
    }
    benchmark::DoNotOptimize(y.data());
  }
  state.counters["GFLOP/s"] =
      benchmark::Counter(flops / 1e9, benchmark::Counter::kIsIterationInvariantRate);
}

#ifdef TARMAC_HAVE_OPENBLAS
void BM_Sgemm(benchmark::State& state) {
  const int64_t rows = state.range(0), cols = state.range(1);
  const int threads = static_cast<int>(state.range(2));
  const MatrixView w = Weights(DType::kF32, cols, rows * cols * 4,
                              "matmul/" + std::to_string(rows) + "x" + std::to_string(cols));
  const auto x = RandomVector(kTokens * cols, 11);
  std::vector<float> y(kTokens * rows);
  openblas_set_num_threads(threads);
  for (auto _ : state) {
    // Y[T][R] = X[T][K] · W[R][K]ᵀ, all row-major.
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, kTokens, rows, cols, 1.0f, x.data(),
                cols, static_cast<const float*>(w.data), cols, 0.0f, y.data(), rows);
    benchmark::DoNotOptimize(y.data());
  }
  SetFlops(state, rows, cols, threads);
  state.SetLabel("openblas");
  // OpenBLAS workers spin for a while after a call; let them go to sleep so they do not steal
  // the 2 cores from the next benchmark.
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
}
#endif

const int64_t kThreads[] = {1, 2};
const int64_t kShapes[][2] = {{2048, 2048}, {5632, 2048}, {2048, 5632}, {576, 1536},
                              {8192, 2048}, {2048, 8192}};

void Register() {
  for (int64_t t : kThreads) {
    benchmark::RegisterBenchmark("BM_Triad", BM_Triad)
        ->Arg(t)->UseRealTime()->Unit(benchmark::kMillisecond)->MinTime(2.0);
    benchmark::RegisterBenchmark("BM_ReadBW", BM_ReadBW)
        ->Arg(t)->UseRealTime()->Unit(benchmark::kMillisecond)->MinTime(2.0);
  }
  const DType mv_types[] = {DType::kQ8_0, DType::kQ4_0, DType::kQ4_K, DType::kQ6_K,
                            DType::kF16,  DType::kBF16, DType::kF32};
  for (DType type : mv_types) {
    for (int64_t t : kThreads) {
      benchmark::RegisterBenchmark(("BM_MatVec/" + std::string(DTypeName(type))).c_str(), BM_MatVec)
          ->Args({static_cast<int64_t>(type), t, kMatVecBytes, 0})->UseRealTime()
          ->Unit(benchmark::kMillisecond)->MinTime(2.0);
    }
  }
  if (Int8MatVecFast()) {
    for (DType type : {DType::kQ8_0, DType::kQ4_0}) {
      for (int64_t t : kThreads) {
        benchmark::RegisterBenchmark(("BM_MatVecInt8/" + std::string(DTypeName(type))).c_str(),
                                     BM_MatVec)
            ->Args({static_cast<int64_t>(type), t, kMatVecBytes, 1})->UseRealTime()
            ->Unit(benchmark::kMillisecond)->MinTime(2.0);
      }
      benchmark::RegisterBenchmark(("BM_MatVecInt8L2/" + std::string(DTypeName(type))).c_str(),
                                   BM_MatVec)
          ->Args({static_cast<int64_t>(type), 1, int64_t{1} << 20, 1})->UseRealTime()
          ->Unit(benchmark::kMicrosecond)->MinTime(0.3);
    }
  }
  // The interleaved kernels run from AVX2 up (TARMAC_ISA=avx2 measures the AVX2 one).
  if (InterleavedInt8Available()) {
    for (DType type : {DType::kQ8_0, DType::kQ4_0}) {
      const std::string name(DTypeName(type));
      for (int64_t t : kThreads) {
        benchmark::RegisterBenchmark(("BM_MatVecInt8Interleaved/" + name).c_str(), BM_MatVec)
            ->Args({static_cast<int64_t>(type), t, kMatVecBytes, 2})->UseRealTime()
            ->Unit(benchmark::kMillisecond)->MinTime(2.0);
      }
      benchmark::RegisterBenchmark(("BM_MatVecInt8InterleavedL2/" + name).c_str(), BM_MatVec)
          ->Args({static_cast<int64_t>(type), 1, int64_t{1} << 20, 2})->UseRealTime()
          ->Unit(benchmark::kMicrosecond)->MinTime(0.3);
      for (int64_t t : kThreads) {
        benchmark::RegisterBenchmark(("BM_MatVecLayers/" + name).c_str(), BM_MatVecLayers)
            ->Args({static_cast<int64_t>(type), t, 2048})->UseRealTime()
            ->Unit(benchmark::kMillisecond)->MinTime(1.0);
      }
      // Half of a core's L2 on the CPUs measured (1-2 MiB): the kernel's own ceiling.
      benchmark::RegisterBenchmark(("BM_MatVecInt8InterleavedCore/" + name).c_str(), BM_MatVec)
          ->Args({static_cast<int64_t>(type), 1, int64_t{1} << 19, 2})->UseRealTime()
          ->Unit(benchmark::kMicrosecond)->MinTime(0.3);
    }
  }
  if (MatVecQ6KAvailable()) {
    for (int64_t t : kThreads) {
      benchmark::RegisterBenchmark("BM_MatVecQ6K/q6_K", BM_MatVec)
          ->Args({static_cast<int64_t>(DType::kQ6_K), t, kMatVecBytes, 3})->UseRealTime()
          ->Unit(benchmark::kMillisecond)->MinTime(2.0);
    }
    benchmark::RegisterBenchmark("BM_MatVecQ6KL2/q6_K", BM_MatVec)
        ->Args({static_cast<int64_t>(DType::kQ6_K), 1, int64_t{1} << 20, 3})->UseRealTime()
        ->Unit(benchmark::kMicrosecond)->MinTime(0.3);
    // As BM_MatVecInt8InterleavedCore: half of a core's L2, the kernel's own ceiling.
    benchmark::RegisterBenchmark("BM_MatVecQ6KCore/q6_K", BM_MatVec)
        ->Args({static_cast<int64_t>(DType::kQ6_K), 1, int64_t{1} << 19, 3})->UseRealTime()
        ->Unit(benchmark::kMicrosecond)->MinTime(0.3);
  }
  // The same kernels on a 1 MiB matrix (L2-resident): their compute ceiling, for diagnosis.
  for (DType type : mv_types) {
    benchmark::RegisterBenchmark(("BM_MatVecL2/" + std::string(DTypeName(type))).c_str(),
                                 BM_MatVec)
        ->Args({static_cast<int64_t>(type), 1, int64_t{1} << 20, 0})->UseRealTime()
        ->Unit(benchmark::kMicrosecond)->MinTime(0.3);
  }
  for (DType type : {DType::kQ8_0, DType::kQ4_0}) {
    for (int64_t tokens : {4, 16, 64, 512}) {
      benchmark::RegisterBenchmark(("BM_MatMulTokens/" + std::string(DTypeName(type))).c_str(),
                                   BM_MatMulTokens)
          ->Args({static_cast<int64_t>(type), tokens, 0})->UseRealTime()
          ->Unit(benchmark::kMicrosecond)->MinTime(0.3);
    }
  }
  // Q6_K's products: what MatMul runs (MatVecQ6K from AVX2 up to 16 tokens, MatMulQ6K from
  // 17) against MatVecMulti and against MatMulQ6K at every count.
  for (int64_t tokens : {1, 2, 4, 8, 12, 16, 17, 32, 64}) {
    for (int64_t alt : {0, 1, 2}) {
      if (alt == 1 && tokens > 16) continue;
      const char* name = alt == 0 ? "BM_MatMulTokens/q6_K" : alt == 1 ? "BM_MatMulTokens/q6_K/multi"
                                                                        : "BM_MatMulTokens/q6_K/gemm";
      benchmark::RegisterBenchmark(name, BM_MatMulTokens)
          ->Args({static_cast<int64_t>(DType::kQ6_K), tokens, alt})->UseRealTime()
          ->Unit(benchmark::kMicrosecond)->MinTime(0.3);
    }
  }
  for (int64_t tokens : {1, 3, 5, 8}) {
    benchmark::RegisterBenchmark("BM_VerifyL2/up", BM_VerifyL2)->Args({tokens, 1024, 384})
        ->UseRealTime()->Unit(benchmark::kMicrosecond)->MinTime(0.3);
    benchmark::RegisterBenchmark("BM_VerifyL2/down", BM_VerifyL2)->Args({tokens, 24, 16384})
        ->UseRealTime()->Unit(benchmark::kMicrosecond)->MinTime(0.3);
  }
  for (int64_t tokens : {8, 12, 16, 32, 48, 64, 65, 96, 128}) {
    for (int64_t packed : {0, 1}) {
      benchmark::RegisterBenchmark("BM_Wp11mStep", BM_Wp11mStep)->Args({tokens, packed, 2})
          ->UseRealTime()->Unit(benchmark::kMicrosecond)->MinTime(0.5);
      benchmark::RegisterBenchmark("BM_Wp11mStep", BM_Wp11mStep)->Args({tokens, packed, 1})
          ->UseRealTime()->Unit(benchmark::kMicrosecond)->MinTime(0.5);
    }
  }
  for (int64_t tokens : {1, 2, 3, 4, 5, 6, 8, 9, 11, 16}) {
    benchmark::RegisterBenchmark("BM_VerifyStack/f16", BM_VerifyStack)
        ->Args({static_cast<int64_t>(DType::kF16), tokens, 2})->UseRealTime()
        ->Unit(benchmark::kMillisecond)->MinTime(1.0);
  }
  for (const auto& s : kShapes) {
    for (int64_t t : kThreads) {
      // Q8_0/Q4_0 (int8 GEMM) everywhere; Q4_K (dequantized into f32 panels) on the square
      // shape only.
      std::vector<DType> types = {DType::kF32, DType::kF16, DType::kQ8_0, DType::kQ4_0};
      if (s[0] == 2048 && s[1] == 2048) types.push_back(DType::kQ4_K);
      for (DType type : types) {
        benchmark::RegisterBenchmark(("BM_MatMul/" + std::string(DTypeName(type))).c_str(), BM_MatMul)
            ->Args({static_cast<int64_t>(type), s[0], s[1], t})->UseRealTime()
            ->Unit(benchmark::kMillisecond)->MinTime(0.5);
      }
#ifdef TARMAC_HAVE_OPENBLAS
      benchmark::RegisterBenchmark("BM_Sgemm/openblas", BM_Sgemm)
          ->Args({s[0], s[1], t})->UseRealTime()->Unit(benchmark::kMillisecond)->MinTime(0.5);
#endif
    }
  }
}

}  // namespace
}  // namespace tarmac::kernels

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  // TARMAC_BENCH_TARGET=AVX2 (or AVX3, SCALAR...) forces that SIMD target, to compare them.
  if (const char* t = std::getenv("TARMAC_BENCH_TARGET")) {
    for (int64_t bit : {HWY_AVX3, HWY_AVX2, HWY_SCALAR, HWY_EMU128}) {
      if (std::string(hwy::TargetName(bit)) == t) hwy::SetSupportedTargetsForTest(bit);
    }
  }
  tarmac::kernels::Register();
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
