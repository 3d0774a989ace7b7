// The engine flags of the model-running subcommands (generate, bench offline, serve),
// registered by one helper so that every subcommand has the same names, ranges and defaults
// (the defaults are engine::EngineConfig's, read from it):
//   -t/--threads, --pin-threads auto|off, --max-running, --max-batched-tokens, --max-context, --block-size,
//   --kv-blocks, --kv-memory/--kv-memory-gib (GiB), --kv-dtype, --no-prefix-cache,
//   --spec off|draft|ngram|auto, --draft-model FILE, --spec-k N, --draft-type q8_0|keep,
//   --spec-max-slowdown F, --spec-tree WxB|off|auto, --spec-tree-tokens N
// The draft defaults to wp-1m-distill-f16.gguf (distilled from wp-11m's samples), else
// wp-1m-f16.gguf, beside a wp-11m target (the bundled models). A draft
// whose weights are all f32/f16/bf16 is quantized to Q8_0 at load unless --draft-type keep: a
// draft round reads half the bytes, and the target's verification keeps the output exact
// whatever the draft proposes. When quantizing fails (it goes through a temporary file) the
// draft loads as stored, with a warning.
#pragma once

#include <memory>
#include <string>

#include <CLI/CLI.hpp>

#include "base/status.h"
#include "base/thread_pool.h"
#include "engine/engine_config.h"
#include "model/llama_model.h"

namespace tarmac::apps {

struct SpecArgs {
  std::string mode = "off";
  std::string draft_model;
  int k;                             // the config's draft length
  std::string draft_type = "q8_0";  // q8_0 | keep
  double max_slowdown;               // policy: others' step slowdown limit; negative: none
  std::string tree = "auto";         // token trees: WxB, off, or auto (3x3 with --spec auto)
  int tree_tokens;                   // most tree tokens per request and step
  SpecArgs();
};

struct EngineFlags {
  int threads;
  std::string pin_threads = "auto";  // auto: DefaultPlacement (base/cpu_affinity.h); off: the OS places them
  int max_running, max_batched_tokens, max_context, block_size, kv_blocks;
  double kv_memory_gib = 0;
  std::string kv_dtype = "f16";
  bool no_prefix_cache = false;
  SpecArgs spec;
  CLI::Option* max_running_option = nullptr;  // to tell a choice from the default
  EngineFlags();
};

// Which flags a subcommand takes (threads always).
enum EngineFlagSet : unsigned { kSchedulerFlags = 1, kKvFlags = 2, kSpecFlags = 4, kAllEngineFlags = 7 };
void AddEngineFlags(CLI::App* cmd, EngineFlags* f, unsigned sets = kAllEngineFlags);
void AddSpecFlags(CLI::App* cmd, SpecArgs* a);

struct SpecSetup {
  engine::SpecMode mode = engine::SpecMode::kOff;
  std::unique_ptr<model::LlamaModel> draft;  // loaded when the mode uses one
  int k = SpecArgs().k;
  std::string draft_path;
  bool draft_quantized = false;  // the draft's float weights were quantized to Q8_0 at load
  double max_slowdown = SpecArgs().max_slowdown;
  int32_t tree_width = 0, tree_branch = 0;  // token trees: siblings at the first `branch` positions
  int32_t tree_tokens = SpecArgs().tree_tokens;
};

// Loads the draft model when needed; errors name the flag.
Result<SpecSetup> LoadSpec(const SpecArgs& a, const std::string& target_path);

// Fills the engine config's speculation fields from a setup.
void ApplySpec(const SpecSetup& s, engine::EngineConfig* cfg);

// --pin-threads (the flag of every subcommand that runs a model): into *pin_threads.
void AddPinThreadsFlag(CLI::App* cmd, std::string* pin_threads);
// The CPUs of each of several engines with these thread counts under --pin-threads (empty
// lists: unpinned).
std::vector<std::vector<int>> EngineCpus(const std::string& pin_threads, const std::vector<int>& threads);
// Pins `pool` and the calling thread (the pool's thread 0) as EngineCpus places one engine;
// a failure to pin only costs speed (a warning).
void PinOwnPool(const std::string& pin_threads, ThreadPool* pool);

// The engine config the flags describe, with the speculation of `spec` (from LoadSpec); its
// cpus as for one engine (EngineCpus).
engine::EngineConfig ToEngineConfig(const EngineFlags& f, const SpecSetup& spec);

}  // namespace tarmac::apps
