#include "apps/spec_flags.h"

#include <filesystem>

namespace tarmac::apps {

void AddSpecFlags(CLI::App* cmd, SpecArgs* a) {
  cmd->add_option("--spec", a->mode, "speculative decoding: off|draft|ngram|auto")
      ->capture_default_str()->check(CLI::IsMember({"off", "draft", "ngram", "auto"}));
  cmd->add_option("--draft-model", a->draft_model,
                  "draft GGUF for --spec draft|auto (default: wp-1m-f16.gguf beside a wp-11m target)");
  cmd->add_option("--spec-k", a->k, "draft length (draft/ngram), largest k the policy may pick (auto)")
      ->capture_default_str()->check(CLI::Range(1, 16));
}

Result<SpecSetup> LoadSpec(const SpecArgs& a, const std::string& target_path) {
  namespace fs = std::filesystem;
  SpecSetup s;
  s.k = a.k;
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
  auto m = model::LlamaModel::Load(draft, /*use_mmap=*/false);
  if (!m.ok()) return InvalidArgument("--draft-model {}: {}", draft, m.status().message());
  s.draft = std::move(m).value();
  s.draft_path = draft;
  return s;
}

void ApplySpec(const SpecSetup& s, engine::EngineConfig* cfg) {
  cfg->spec = s.mode;
  cfg->draft_model = s.draft.get();
  cfg->spec_k = s.k;
}

}  // namespace tarmac::apps
