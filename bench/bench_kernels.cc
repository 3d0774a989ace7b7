// Bandwidth and throughput of the dot/matvec/matmul kernels, with their yardsticks measured
// in the same run (the machine is shared and noisy, so only side-by-side ratios mean much):
//   BM_Triad       STREAM-like a[i] = b[i] + s·c[i] over 1 GiB f32 arrays (≫ L3), via ThreadPool;
//                  counter GB/s counts 12 bytes per element (2 reads + 1 write, STREAM's rule).
//   BM_MatVec      y = W·x for W of ≥ 1.5 GiB per dtype (≫ L3); counter GB/s = weight bytes
//                  read per second (bench/run_kernel_bench.sh divides its median by the
//                  triad median at the same thread count).
//   BM_MatMul      Y = X·Wᵀ, 512 tokens, f32/f16 weights, LLM shapes; GFLOP/s = 2·T·R·K / s.
//   BM_Sgemm       OpenBLAS cblas_sgemm on the same f32 shapes and thread count.
// Args: {threads} or {rows, cols, threads}. Big buffers live in one slot, replaced when a
// benchmark needs a different one, so at most one weight matrix (plus the triad arrays) exist.

#include <benchmark/benchmark.h>

#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <numeric>
#include <string>
#include <thread>
#include <vector>

#include "base/thread_pool.h"
#include "hwy/targets.h"
#include "kernels/matmul.h"
#include "kernels/matvec.h"
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

// One big buffer at a time, identified by a key; pages touched in parallel by `pool`.
struct BigSlot {
  std::string key;
  AlignedBuffer buf;
};
BigSlot& Slot(int i) {
  static BigSlot slots[2];
  return slots[i];
}

uint64_t SplitMix(uint64_t& s) {
  uint64_t z = (s += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

// ---------------------------------------------------------------- triad
constexpr int64_t kTriadN = kGiB / 4;  // floats per array: 1 GiB each

void BM_Triad(benchmark::State& state) {
  const int threads = static_cast<int>(state.range(0));
  ThreadPool pool(threads);
  BigSlot& slot = Slot(0);
  if (slot.key != "triad") {
    slot.buf = AlignedBuffer();
    slot.buf.Resize(3 * kTriadN * sizeof(float));
    slot.key = "triad";
  }
  float* a = slot.buf.as<float>();
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

// ---------------------------------------------------------------- matvec
constexpr int64_t kMatVecCols = 4096;
constexpr int64_t kMatVecBytes = 3 * kGiB / 2;

// Fills n bytes of `type` rows with random quants/values whose scales are sane (no Inf/NaN,
// no subnormal products: those would trigger slow microcode paths and measure the wrong thing).
void FillWeights(DType type, uint8_t* p, int64_t rows, int64_t row_bytes, ThreadPool& pool) {
  pool.ParallelFor(rows, 1024, [&](int64_t r0, int64_t r1, int) {
    uint64_t seed = 1234 + r0;
    for (int64_t r = r0; r < r1; ++r) {
      uint8_t* row = p + r * row_bytes;
      for (int64_t i = 0; i + 8 <= row_bytes; i += 8) {
        const uint64_t v = SplitMix(seed);
        std::memcpy(row + i, &v, 8);
      }
      const auto patch16 = [&](int64_t off, uint16_t mask, uint16_t bits) {
        uint16_t h;
        std::memcpy(&h, row + off, 2);
        h = (h & mask) | bits;
        std::memcpy(row + off, &h, 2);
      };
      switch (type) {
        case DType::kF32:
          for (int64_t i = 0; i < row_bytes; i += 4) {
            uint32_t u;
            std::memcpy(&u, row + i, 4);
            u = (u & 0x807fffffu) | 0x3f000000u;  // ±[0.5, 1)
            std::memcpy(row + i, &u, 4);
          }
          break;
        case DType::kF16:
          for (int64_t i = 0; i < row_bytes; i += 2) patch16(i, 0x83ff, 0x3800);
          break;
        case DType::kBF16:
          for (int64_t i = 0; i < row_bytes; i += 2) patch16(i, 0x807f, 0x3f00);
          break;
        case DType::kQ8_0:
          for (int64_t i = 0; i < row_bytes; i += sizeof(BlockQ8_0)) patch16(i, 0x83ff, 0x2000);
          break;
        case DType::kQ4_0:
          for (int64_t i = 0; i < row_bytes; i += sizeof(BlockQ4_0)) patch16(i, 0x83ff, 0x2000);
          break;
        case DType::kQ4_K:
          for (int64_t i = 0; i < row_bytes; i += sizeof(BlockQ4_K)) {
            patch16(i + offsetof(BlockQ4_K, d), 0x03ff, 0x1800);
            patch16(i + offsetof(BlockQ4_K, dmin), 0x03ff, 0x1800);
          }
          break;
        case DType::kQ6_K:
          for (int64_t i = 0; i < row_bytes; i += sizeof(BlockQ6_K))
            patch16(i + offsetof(BlockQ6_K, d), 0x83ff, 0x1800);
          break;
        default:
          break;
      }
    }
  });
}

// Returns a dense weight matrix of `type` with at least `min_bytes`, cols wide, in slot 1.
MatrixView BigWeights(DType type, int64_t cols, int64_t min_bytes, ThreadPool& pool) {
  const int64_t row_bytes = RowBytes(type, cols);
  const int64_t rows = (min_bytes + row_bytes - 1) / row_bytes;
  BigSlot& slot = Slot(1);
  const std::string key = std::string(DTypeName(type)) + "/" + std::to_string(cols) + "/" +
                          std::to_string(min_bytes);
  if (slot.key != key) {
    slot.buf = AlignedBuffer();
    slot.buf.Resize(rows * row_bytes);
    FillWeights(type, slot.buf.data(), rows, row_bytes, pool);
    slot.key = key;
  }
  return MatrixView::Dense(type, slot.buf.data(), rows, cols);
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
  // The triad arrays are not needed any more: give their 3 GiB back.
  if (!Slot(0).key.empty()) {
    Slot(0).buf = AlignedBuffer();
    Slot(0).key.clear();
  }
  const MatrixView w = BigWeights(type, kMatVecCols, min_bytes, pool);
  const auto x = RandomVector(w.cols, 7);
  std::vector<float> y(w.rows);
  for (auto _ : state) {
    MatVec(w, x.data(), y.data(), &pool);
    benchmark::DoNotOptimize(y.data());
  }
  const double bytes = static_cast<double>(w.rows) * w.row_stride;
  state.counters["GB"] =
      benchmark::Counter(bytes / 1e9, benchmark::Counter::kIsIterationInvariantRate);
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
  const MatrixView w = BigWeights(type, cols, rows * RowBytes(type, cols), pool);
  const auto x = RandomVector(kTokens * cols, 11);
  std::vector<float> y(kTokens * rows);
  for (auto _ : state) {
    MatMul(w, x.data(), kTokens, y.data(), &pool);
    benchmark::DoNotOptimize(y.data());
  }
  SetFlops(state, rows, cols, threads);
  state.SetLabel(std::string(DTypeName(type)));
}

#ifdef TARMAC_HAVE_OPENBLAS
void BM_Sgemm(benchmark::State& state) {
  const int64_t rows = state.range(0), cols = state.range(1);
  const int threads = static_cast<int>(state.range(2));
  ThreadPool fill_pool(threads);
  const MatrixView w = BigWeights(DType::kF32, cols, rows * cols * 4, fill_pool);
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
const int64_t kShapes[][2] = {{2048, 2048}, {5632, 2048}, {2048, 5632}, {576, 1536}};

void Register() {
  for (int64_t t : kThreads) {
    benchmark::RegisterBenchmark("BM_Triad", BM_Triad)
        ->Arg(t)->UseRealTime()->Unit(benchmark::kMillisecond)->MinTime(2.0);
  }
  const DType mv_types[] = {DType::kQ8_0, DType::kQ4_0, DType::kQ4_K, DType::kQ6_K,
                            DType::kF16,  DType::kBF16, DType::kF32};
  for (DType type : mv_types) {
    for (int64_t t : kThreads) {
      benchmark::RegisterBenchmark(("BM_MatVec/" + std::string(DTypeName(type))).c_str(), BM_MatVec)
          ->Args({static_cast<int64_t>(type), t, kMatVecBytes})->UseRealTime()
          ->Unit(benchmark::kMillisecond)->MinTime(2.0);
    }
  }
  // The same kernels on a 1 MiB matrix (L2-resident): their compute ceiling, for diagnosis.
  for (DType type : mv_types) {
    benchmark::RegisterBenchmark(("BM_MatVecL2/" + std::string(DTypeName(type))).c_str(),
                                 BM_MatVec)
        ->Args({static_cast<int64_t>(type), 1, int64_t{1} << 20})->UseRealTime()
        ->Unit(benchmark::kMicrosecond)->MinTime(0.3);
  }
  for (const auto& s : kShapes) {
    for (int64_t t : kThreads) {
      for (DType type : {DType::kF32, DType::kF16}) {
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
