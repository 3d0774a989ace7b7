#include "apps/model_loading.h"

#include <unistd.h>

#include <cstdio>
#include <map>
#include <memory>
#include <string>

#include "base/progress.h"
#include "tokenizer/vocab_gguf.h"

namespace tarmac::apps {
namespace {

// Touches one byte per page of every tensor (a progress bar on a terminal, one line otherwise).
void FaultInWeights(const gguf::File& f, bool quiet) {
  Progress progress("loading weights (mmap)", static_cast<int64_t>(f.tensor_bytes()), Progress::Unit::kBytes, "",
                    quiet ? Progress::Mode::kOff : Progress::Mode::kAuto);
  volatile uint8_t sink = 0;
  for (const auto& t : f.tensors()) {
    for (uint64_t off = 0; off < t.nbytes; off += 4096) sink = sink + t.data[off];
    progress.Add(static_cast<int64_t>(t.nbytes));
  }
}

}  // namespace

Result<LoadedModel> LoadModelAndTokenizer(const std::string& path, bool quiet, bool use_mmap,
                                          int32_t context) {
  LoadedModel out;
  // One bar per stage of the load (reading the file, re-laying out weights).
  std::unique_ptr<Progress> progress;
  std::string stage;
  model::LlamaModel::ProgressFn on_progress;
  if (!quiet)
    on_progress = [&](const std::string& s, int64_t done, int64_t total) {
      if (!progress || s != stage) {
        stage = s;
        progress = std::make_unique<Progress>("loading " + path + ": " + s, total,
                                              s == "reading" ? Progress::Unit::kBytes : Progress::Unit::kItems,
                                              s == "reading" ? "" : "matrices");
      }
      progress->Set(done);
    };
  auto model = model::LlamaModel::Load(path, use_mmap, context, on_progress);
  progress.reset();
  if (!model.ok()) return Status(model.status().code(), path + ": " + model.status().message());
  out.model = std::move(model).value();
  const gguf::File& f = out.model->file();
  auto vocab = tok::LoadVocab(f);
  if (!vocab.ok()) return Status(vocab.status().code(), path + ": " + vocab.status().message());
  auto tokenizer = tok::Tokenizer::Create(std::move(vocab).value());
  if (!tokenizer.ok()) return Status(tokenizer.status().code(), path + ": " + tokenizer.status().message());
  out.tokenizer = std::move(tokenizer).value();
  if (out.tokenizer->n_vocab() != out.model->config().n_vocab) {
    return InvalidArgument("{}: tokenizer has {} tokens but token_embd.weight has {} rows", path,
                           out.tokenizer->n_vocab(), out.model->config().n_vocab);
  }
  if (use_mmap) FaultInWeights(f, quiet);
  if (!quiet) {
    const model::ModelConfig& c = out.model->config();
    std::map<std::string, int> dtypes;
    for (const auto& t : f.tensors()) dtypes[std::string(DTypeName(t.type))]++;
    std::string dt;
    for (const auto& [name, n] : dtypes) dt += (dt.empty() ? "" : ", ") + name + " x" + std::to_string(n);
    std::fprintf(stderr,
                 "loaded %s: arch %s, %.1fM params, %d layers, dim %d, heads %d/%d (head dim %d), "
                 "ffn %d, vocab %d, context %d, weights %.1f MiB [%s]\n",
                 c.name.empty() ? path.c_str() : c.name.c_str(), c.arch_name.c_str(),
                 f.parameter_count() / 1e6, c.n_layer, c.n_embd, c.n_head, c.n_head_kv,
                 c.head_dim, c.n_ff, c.n_vocab, c.n_ctx_train,
                 out.model->weight_bytes() / (1024.0 * 1024.0), dt.c_str());
    if (out.model->amx_packed_bytes() > 0) {
      std::fprintf(stderr, "AMX: %.1f MiB of weights pre-split for batched matmuls "
                   "(TARMAC_ISA=avx512 turns AMX off)\n",
                   out.model->amx_packed_bytes() / (1024.0 * 1024.0));
    }
    if (out.model->decode_packed_bytes() > 0) {
      std::fprintf(stderr,
                   "decode: %.1f MiB of Q4_0/Q8_0 weights moved into an interleaved layout for "
                   "the int8 matvec (`tarmac info` lists the kernels)\n",
                   out.model->decode_packed_bytes() / (1024.0 * 1024.0));
    }
  }
  return out;
}

}  // namespace tarmac::apps
