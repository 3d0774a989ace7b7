#include "apps/engine_flags.h"

#include <stdlib.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>

#include "base/cpu_affinity.h"
#include "base/log.h"
#include "base/thread_pool.h"
#include "model/kv_dtype.h"
#include "gguf/gguf_file.h"
#include "gguf/quantize_file.h"

namespace tarmac::apps {

SpecArgs::SpecArgs() {
  const engine::EngineConfig d;
  k = d.spec.policy_config.max_k;
  max_slowdown = d.spec.policy_config.max_other_slowdown;
  tree_tokens = d.spec.policy_config.max_tree_tokens;
}

EngineFlags::EngineFlags() : threads(ThreadPool::DefaultThreads()) {
  const engine::EngineConfig d;
  max_running = d.sched.max_running;
  max_batched_tokens = d.sched.max_batched_tokens;
  max_context = d.sched.max_context;
  block_size = d.sched.block_size;
  kv_blocks = d.kv.blocks;
  kv_memory_gib = static_cast<double>(d.kv.memory_bytes) / (1ll << 30);
  kv_dtype = model::KvDtypeName(d.kv.dtype);
  no_prefix_cache = !d.kv.prefix_cache;
}

void AddEngineFlags(CLI::App* cmd, EngineFlags* f, unsigned sets) {
  cmd->add_option("-t,--threads", f->threads, "compute threads per model")->capture_default_str()
      ->check(CLI::Range(1, 256));
  AddPinThreadsFlag(cmd, &f->pin_threads);
  if (sets & kSchedulerFlags) {
    f->max_running_option = cmd->add_option("--max-running", f->max_running, "requests batched (holding KV) per model")
                                ->capture_default_str()->check(CLI::Range(1, 1 << 16));
    cmd->add_option("--max-batched-tokens", f->max_batched_tokens, "tokens per engine step")->capture_default_str()
        ->check(CLI::Range(1, 1 << 20));
    cmd->add_option("--max-context", f->max_context, "context per request (0: the model's)")->capture_default_str()
        ->check(CLI::Range(0, 1 << 24));
    cmd->add_option("--block-size", f->block_size, "tokens per KV block")->capture_default_str()
        ->check(CLI::Range(1, 1024));
  }
  if (sets & kKvFlags) {
    cmd->add_option("--kv-blocks", f->kv_blocks, "KV blocks per model (0: from --kv-memory or automatic)")
        ->capture_default_str()->check(CLI::Range(0, 1 << 30));
    cmd->add_option("--kv-memory,--kv-memory-gib", f->kv_memory_gib,
                    "KV memory per model in GiB (0: enough for --max-running full contexts, at most half "
                    "the free memory)")
        ->capture_default_str()->check(CLI::Range(0.0, 4096.0));
    cmd->add_option("--kv-dtype", f->kv_dtype, "KV element type: f16 or int8")->capture_default_str()
        ->check(CLI::IsMember({"f16", "int8"}));
    cmd->add_flag("--no-prefix-cache", f->no_prefix_cache, "disable the radix prefix cache");
  }
  if (sets & kSpecFlags) AddSpecFlags(cmd, &f->spec);
}

void AddPinThreadsFlag(CLI::App* cmd, std::string* pin_threads) {
  cmd->add_option("--pin-threads", *pin_threads,
                  "auto: when the models' threads add up to the CPUs this process may use, each "
                  "thread gets a CPU of its own (two compute threads left on one CPU run at one's "
                  "speed); off: the OS places them. A config's cpus override it")
      ->capture_default_str()->check(CLI::IsMember({"auto", "off"}));
}

std::vector<std::vector<int>> EngineCpus(const std::string& pin_threads, const std::vector<int>& threads) {
  if (pin_threads == "off") return std::vector<std::vector<int>>(threads.size());
  return DefaultPlacement(threads, AllowedCpus());
}

void PinOwnPool(const std::string& pin_threads, ThreadPool* pool) {
  const std::vector<int> cpus = EngineCpus(pin_threads, {pool->num_threads()})[0];
  if (cpus.empty()) return;
  if (Status st = pool->PinWithCaller(cpus); !st.ok()) TLOG_WARN("--pin-threads: {}", st.message());
}

engine::EngineConfig ToEngineConfig(const EngineFlags& f, const SpecSetup& spec) {
  engine::EngineConfig c;
  c.threads = f.threads;
  c.cpus = EngineCpus(f.pin_threads, {f.threads})[0];
  c.sched.max_running = f.max_running;
  c.sched.max_batched_tokens = f.max_batched_tokens;
  c.sched.max_context = f.max_context;
  c.sched.block_size = f.block_size;
  c.kv.blocks = f.kv_blocks;
  c.kv.memory_bytes = static_cast<int64_t>(f.kv_memory_gib * (1ll << 30));
  c.kv.dtype = f.kv_dtype == "int8" ? model::KvDtype::kInt8 : model::KvDtype::kF16;
  c.kv.prefix_cache = !f.no_prefix_cache;
  ApplySpec(spec, &c);
  return c;
}

void AddSpecFlags(CLI::App* cmd, SpecArgs* a) {
  cmd->add_option("--spec", a->mode, "speculative decoding: off|draft|ngram|auto")
      ->capture_default_str()->check(CLI::IsMember({"off", "draft", "ngram", "auto"}));
  cmd->add_option("--draft-model", a->draft_model,
                  "draft GGUF for --spec draft|auto (default: wp-1m-distill-f16.gguf, else wp-1m-f16.gguf, beside a wp-11m target)");
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
  cmd->add_option("--spec-tree", a->tree,
                  "token trees with a draft model: WxB drafts W more candidates at each of the "
                  "first B positions, verified in the same step (fixed with --spec draft, the "
                  "most the policy may choose with auto); off: chains; auto: 3x3 with --spec "
                  "auto, chains with --spec draft")
      ->capture_default_str();
  cmd->add_option("--spec-tree-tokens", a->tree_tokens, "most tree tokens per request and step")
      ->capture_default_str()->check(CLI::Range(1, 64));
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
  s.tree_tokens = a.tree_tokens;
  if (a.mode == "off") return s;
  TARMAC_ASSIGN_OR_RETURN(s.mode, engine::ParseSpecMode(a.mode));
  if (a.tree == "auto") {
    if (s.mode == engine::SpecMode::kAuto) s.tree_width = s.tree_branch = 3;
  } else if (a.tree != "off") {
    int w = -1, b = -1;
    char tail = 0;
    if (std::sscanf(a.tree.c_str(), "%dx%d%c", &w, &b, &tail) != 2 || w < 0 || w > speculative::kMaxWidth ||
        b < 0 || b > 16) {
      return InvalidArgument("--spec-tree must be WxB (W in 0..{}, B in 0..16), off or auto, got '{}'",
                             speculative::kMaxWidth, a.tree);
    }
    s.tree_width = w;
    s.tree_branch = b;
  }
  if (s.mode == engine::SpecMode::kNgram) return s;
  std::string draft = a.draft_model;
  if (draft.empty()) {
    const fs::path t(target_path);
    // The draft distilled from wp-11m's own samples first (it accepts more), wp-1m otherwise.
    if (t.filename().string().rfind("wp-11m", 0) == 0) {
      for (const char* name : {"wp-1m-distill-f16.gguf", "wp-1m-f16.gguf"}) {
        const fs::path beside = t.parent_path() / name;
        if (fs::exists(beside)) {
          draft = beside.string();
          break;
        }
      }
    }
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
  cfg->spec.mode = s.mode;
  cfg->spec.draft_model = s.draft.get();
  cfg->spec.policy_config.max_k = s.k;
  cfg->spec.policy_config.max_other_slowdown = s.max_slowdown;
  cfg->spec.policy_config.max_width = s.tree_width;
  cfg->spec.policy_config.max_branch = s.tree_branch;
  cfg->spec.policy_config.max_tree_tokens = s.tree_tokens;
}

}  // namespace tarmac::apps
