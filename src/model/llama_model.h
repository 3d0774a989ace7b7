// LlamaModel: weights and forward pass of a decoder-only transformer on the CPU, for every
// family model/arch.h describes (llama, qwen2, qwen3, gemma2, gemma3, phi3): one forward pass
// whose optional steps (Q/K norms, post-norms, the activation, windows, soft-capping,
// embedding scale) are switched by the family's description, never by its name.
//
// Owns: the GGUF file, mapped (weights used in place) or, with use_mmap false, read into
// huge-page memory; the weights' views and f32 copies of the 1-D tensors not usable in place
// (ModelWeights); the kernel layouts made
// at load (AmxPackedMatrix copies on AMX, QuantInterleaved copies of Q4_0/Q8_0 matrices on
// AVX-512 VNNI, whose GGUF bytes are then released unless the file is mapped); the rope caches
// (global layers', and windowed layers' when their rope differs);
// and scratch activations sized by the largest batch seen (grown, never shrunk: no allocation
// per token once warm). Does not own the KV cache (the engine owns blocks; Forward writes the
// batch's K/V into it).
//
// Forward mutates the scratch buffers and the KV slots named by the batch: one caller at a
// time. The thread pool is borrowed.
#pragma once

#include <atomic>
#include <functional>
#include <initializer_list>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "base/status.h"
#include "base/thread_pool.h"
#include "gguf/gguf_file.h"
#include "kernels/moe_ffn.h"
#include "kernels/ops.h"
#include "kernels/prepared_weights.h"
#include "model/kv_cache.h"
#include "model/forward_batch.h"
#include "model/model_config.h"
#include "model/model_weights.h"
#include "tensor/aligned_buffer.h"
#include "tensor/view.h"

namespace tarmac::model {

class LlamaModel {
 public:
  // Opens and validates the file: every tensor present with the expected shape and a dtype
  // the kernels support; errors name the tensor.
  // use_mmap: weights stay in the file mapping (shared page cache, instant load). Otherwise
  // they are copied into anonymous memory backed by transparent huge pages: 4 KiB pages stop
  // the hardware prefetchers at every page boundary and cost a TLB miss each, which shows in
  // bandwidth-bound decode of models larger than the caches.
  // context: the longest sequence the caller will run (0: the trained context); LongRoPE
  // (Phi-3) picks its long or short factors by it, as llama.cpp does by its context size.
  // progress (optional): called during the load, on the caller's thread, with a stage
  // ("reading": bytes of the file, without mmap; "preparing weights (AMX)", "preparing weights
  // (int8 decode)": matrices re-laid out), the work done and its total.
  using ProgressFn = std::function<void(const std::string& stage, int64_t done, int64_t total)>;
  static Result<std::unique_ptr<LlamaModel>> Load(const std::string& path, bool use_mmap = true, int32_t context = 0,
                                                  const ProgressFn& progress = {});

  const ModelConfig& config() const { return config_; }
  const gguf::File& file() const { return file_; }

  // Runs the batch; writes K/V of every token into `cache` at its slot, and the logits of the
  // tokens in batch.logits_for to logits ([logits_for.size()][n_vocab], resized).
  // Preconditions: slots and block tables valid for cache; positions < rope capacity. With
  // config().KvRetentionWindow() = W > 0, a block table's entries for blocks wholly before
  // (the sequence's first position in the batch) - W + 1 are never read (may be freed).
  void Forward(const ForwardBatch& batch, KvCache* cache, ThreadPool* pool,
               std::vector<float>* logits);

  // Throwaway forward passes of 32, 4 and 1 tokens of one sequence (a prefill, a verify-sized
  // step and a decode step) into a private 3-block KV cache of kv_dtype, so that a server's
  // first request does not pay for first use: the scratch buffers' growth and the per-thread
  // scratch of the kernels on the calling thread and the pool's, with their page faults, the
  // AMX tile state. Call from the thread that will call Forward (same preconditions). Leaves
  // nothing a later Forward reads; its results equal those without it.
  void Warmup(ThreadPool* pool, KvDtype kv_dtype);

  // Total bytes of weights.
  int64_t weight_bytes() const { return weight_bytes_; }
  // Bytes one token's decode step reads (a mixture of experts reads its chosen experts only:
  // ModelWeights::ActiveBytesPerToken); weight_bytes() for a dense model.
  int64_t active_weight_bytes() const { return active_weight_bytes_; }
  // Mixture of experts: tokens routed to each expert since load, [n_layer][n_expert] (every
  // choice of every token Forward ran, prefill and decode); empty for a dense model.
  // Thread-safe (relaxed counters: a reader may see a step half counted).
  std::vector<int64_t> ExpertTokenCounts() const;
  // Bytes of weights pre-split for the AMX GEMM (kernels/matmul_amx.h); 0 without AMX.
  int64_t amx_packed_bytes() const { return prepared_.amx_bytes(); }
  // Bytes of Q4_0/Q8_0 weights moved into the interleaved decode layout
  // (kernels/quant_interleaved.h; their GGUF bytes are released unless the file is mapped);
  // 0 without AVX-512 VNNI or without such weights.
  int64_t decode_packed_bytes() const { return prepared_.interleaved_bytes(); }

 private:
  LlamaModel() = default;
  Status Init(int32_t context);
  void EnsureScratch(int32_t n_tokens);
  // The kernels' copies of the projections (kernels/prepared_weights.h), made once at load.
  void PrepareWeights();
  ProgressFn progress_;  // set during Load only
  void Project(const MatrixView& w, const float* x, int32_t n_tokens, float* y,
               ThreadPool* pool) const;
  // Project for several matrices with the same input (Q/K/V, gate/up), fused where the
  // kernels allow it.
  void ProjectShared(std::initializer_list<const MatrixView*> ws, std::initializer_list<float*> ys,
                     const float* x, int32_t n_tokens, ThreadPool* pool) const;
  // The steps of Forward, in order; each works on the scratch rows of the batch's n tokens.
  void Embed(const ForwardBatch& batch);
  void PlanQueryTiles(const ForwardBatch& batch);
  void AttentionBlock(int32_t il, const ForwardBatch& batch, KvCache* cache, ThreadPool* pool);
  void FeedForwardBlock(int32_t il, int32_t n, ThreadPool* pool);
  // FeedForwardBlock of a mixture-of-experts layer: route, run the chosen experts, add.
  void ExpertBlock(int32_t il, int32_t n, ThreadPool* pool);
  void Output(const ForwardBatch& batch, ThreadPool* pool, std::vector<float>* logits);

  AlignedBuffer owned_bytes_;  // file contents when not mapped (must outlive file_)
  gguf::File file_;
  ModelConfig config_;
  ModelWeights w_;
  kernels::RopeCache rope_;       // global layers
  kernels::RopeCache rope_swa_;   // windowed layers, when config_.separate_swa_rope()
  int64_t weight_bytes_ = 0;
  int64_t active_weight_bytes_ = 0;
  std::unique_ptr<std::atomic<int64_t>[]> expert_tokens_;  // [n_layer * n_expert], MoE only
  kernels::PreparedWeights prepared_;  // w_'s views point into it

  struct QueryTile {
    int32_t first;  // index of the first token in the batch
    int32_t count;  // consecutive positions of one sequence
  };
  std::vector<QueryTile> tiles_;
  // Scratch, [n_tokens][dim] row-major each.
  int32_t scratch_tokens_ = 0;
  // 64-byte aligned: the kernels read these rows with full-width vector loads.
  AlignedVector<float> x_, xn_, q_, k_, v_, attn_, gate_, up_, logits_in_;
  // Mixture of experts: router logits [n][n_expert], the choices [n][n_used], the block's
  // output [n][n_embd] and the expert kernel's buffers.
  AlignedVector<float> router_logits_, expert_weights_, moe_out_;
  std::vector<int32_t> expert_ids_;
  kernels::MoeScratch moe_scratch_;
};

}  // namespace tarmac::model
