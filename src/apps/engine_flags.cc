#include "apps/spec_flags.h"

#include <stdlib.h>
#include <unistd.h>

#include <filesystem>

#include "base/log.h"
#include "gguf/gguf_file.h"
#include "gguf/quantize_file.h"

namespace tarmac::apps {

void AddSpecFlags(CLI::App* cmd, SpecArgs* a) {
  cmd->add_option("--spec", a->mode, "speculative decoding: off|draft|ngram|auto")
      ->capture_default_str()->check(CLI::IsMember({"off", "draft", "ngram", "auto"}));
  cmd->add_option("--draft-model", a->draft_model,
                  "draft GGUF for --spec draft|auto (default: wp-1m-f16.gguf beside a wp-11m target)");
  cmd->add_option("--spec-k", a->k, "draft length (draft/ngram), largest k the policy may pick (auto)")
      ->capture_default_str()->check(CLI::Range(1, 16));
  cmd->add_option("--draft-type", a->draft_type,
                  "draft weights: q8_0 quantizes an f32/f16/bf16 draft at load (half the bytes "
                  "per draft round; outputs stay exact), keep uses the file's types")
      ->capture_default_str()->check(CLI::IsMember({"q8_0", "keep"}));
  cmd->add_option("--spec-max-slowdown", a->max_slowdown,
                  "auto: most a bucket's speculation may lengthen the other requests' decode "
                  "steps (0.05 = 5%; a low-acceptance bucket's TPOT must not pay for another's "
                  "gain); negative: no limit")
      ->capture_default_str()->check(CLI::Range(-1.0, 100.0));
}

namespace {

// Whether every 2-D tensor of the GGUF at `path` is f32/f16/bf16 (a draft worth quantizing).
Result<bool> AllFloatWeights(const std::string& path) {
  TARMAC_ASSIGN_OR_RETURN(gguf::File f, gguf::File::Open(path));
  for (const gguf::TensorInfo& t : f.tensors()) {
    if (t.dims.size() >= 2 && t.type != DType::kF32 && t.type != DType::kF16 &&
        t.type != DType::kBF16) {
      return false;
    }
  }
  return true;
}

// Loads `path` with its float weights quantized to Q8_0: the quantizer writes a temporary
// file (removed before returning), which is read into memory.
Result<std::unique_ptr<model::LlamaModel>> LoadQuantized(const std::string& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::path dir = fs::temp_directory_path(ec);
  if (ec) dir = "/tmp";
  std::string tmp = (dir / "tarmac-draft-XXXXXX.gguf").string();
  const int fd = mkstemps(tmp.data(), 5);
  if (fd < 0) return IoError("cannot create a temporary file in {} for the Q8_0 draft", dir.string());
  close(fd);
  struct Remove {
    std::string p;
    ~Remove() {
      std::error_code e;
      std::filesystem::remove(p, e);
    }
  } remove{tmp};
  ThreadPool pool(ThreadPool::DefaultThreads());
  TARMAC_RETURN_IF_ERROR(
      gguf::QuantizeFile(path, tmp, DType::kQ8_0, gguf::QuantizeOptions{}, &pool).status());
  return model::LlamaModel::Load(tmp, /*use_mmap=*/false);
}

}  // namespace

Result<SpecSetup> LoadSpec(const SpecArgs& a, const std::string& target_path) {
  namespace fs = std::filesystem;
  SpecSetup s;
  s.k = a.k;
  s.max_slowdown = a.max_slowdown;
  if (a.mode == "off") return s;
  s.mode = a.mode == "draft" ? engine::SpecMode::kDraft
           : a.mode == "ngram" ? engine::SpecMode::kNgram : engine::SpecMode::kAuto;
  if (s.mode == engine::SpecMode::kNgram) return s;
  std::string draft = a.draft_model;
  if (draft.empty()) {
    const fs::path t(target_path);
    const fs::path beside = t.parent_path() / "wp-1m-f16.gguf";
    if (t.filename().string().rfind("wp-11m", 0) == 0 && fs::exists(beside)) draft = beside.string();
  }
  if (draft.empty()) {
    if (s.mode == engine::SpecMode::kAuto) return s;  // auto without a draft: n-gram
    return InvalidArgument("--spec draft needs --draft-model FILE (no default draft for {})",
                           target_path);
  }
  bool quantize = false;
  if (a.draft_type == "q8_0") {
    auto all_float = AllFloatWeights(draft);
    if (!all_float.ok()) {
      return InvalidArgument("--draft-model {}: {}", draft, all_float.status().message());
    }
    quantize = *all_float;
  }
  Result<std::unique_ptr<model::LlamaModel>> m = InvalidArgument("not loaded");
  if (quantize) {
    m = LoadQuantized(draft);
    if (!m.ok()) {
      // Quantizing is only a speed-up (it needs a writable temporary directory, say): the
      // draft as stored still works.
      TLOG_WARN("--draft-model {}: not quantized to Q8_0 ({}); using its own weight types",
                draft, m.status().message());
      quantize = false;
    }
  }
  if (!quantize) m = model::LlamaModel::Load(draft, /*use_mmap=*/false);
  if (!m.ok()) return InvalidArgument("--draft-model {}: {}", draft, m.status().message());
  s.draft = std::move(m).value();
  s.draft_path = draft;
  s.draft_quantized = quantize;
  return s;
}

void ApplySpec(const SpecSetup& s, engine::EngineConfig* cfg) {
  cfg->spec = s.mode;
  cfg->draft_model = s.draft.get();
  cfg->spec_k = s.k;
  cfg->spec_max_slowdown = s.max_slowdown;
}

}  // namespace tarmac::apps
