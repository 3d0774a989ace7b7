// `tarmac gguf ...`: inspect, quantize, make-random and pad.
//
// Exit codes (commands.h): 0 ok; 2 bad usage or bad input (missing or malformed file, unknown
// type or shape); 1 a failure while doing the work (e.g. writing the output). Errors go to
// stderr as one line starting with "tarmac gguf <command>:"; no partial output file is ever
// left behind (gguf::Writer writes to a temp file and renames).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include <unistd.h>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "apps/commands.h"
#include "base/progress.h"
#include "base/thread_pool.h"
#include "gguf/gguf_file.h"
#include "gguf/make_random.h"
#include "gguf/model_presets.h"
#include "gguf/pad_model.h"
#include "gguf/quantize_file.h"

namespace tarmac::apps {
namespace {

using gguf::File;
using gguf::Value;
using gguf::ValueType;
namespace fs = std::filesystem;

int Fail(const char* cmd, int code, const std::string& msg) {
  std::fprintf(stderr, "tarmac gguf %s: %s\n", cmd, msg.c_str());
  return code;
}

// Statuses caused by what the user handed us (a file, a flag) are usage errors (2); the rest
// (I/O while writing, internal) are runtime failures (1).
int ExitCodeFor(const Status& st) {
  switch (st.code()) {
    case StatusCode::kInvalidArgument:
    case StatusCode::kDataLoss:
    case StatusCode::kNotFound:
    case StatusCode::kUnimplemented:
      return 2;
    default:
      return 1;
  }
}

constexpr const char* kTypeHelp =
    "llama.cpp's file types, whose rules give some tensors more bits: q4_k_m, q5_k_m, q6_k, "
    "q8_0, q4_0, q3_k_m, q2_k, iq4_xs, iq2_xxs, ... (f16, bf16, f32 too); or a tensor type "
    "llama.cpp has no file type of, written everywhere: q3_k, q4_k, q5_k, mxfp4 (note: "
    "llama-quantize reads q4_k as q4_k_m; tarmac does not)";
constexpr const char* kPureHelp =
    "no mix rules: the --type's base tensor type wherever its blocks fit (llama-quantize --pure)";

// --type NAME [--pure] -> the target, or a usage message naming the valid names.
Result<gguf::QuantTarget> ParseTypeFlag(const std::string& name, bool pure) {
  auto t = gguf::ParseQuantTarget(name, pure);
  if (!t.ok()) {
    return InvalidArgument("unknown --type '{}' (use one of {})", name, gguf::QuantTargetNames());
  }
  return t;
}

// "1 q6_K, 43 q4_K, 13 f32": how many tensors went to each type, most first.
std::string TypeTally(const std::map<std::string, int>& by_type) {
  std::vector<std::pair<int, std::string>> v;
  for (const auto& [name, n] : by_type) v.emplace_back(-n, name);
  std::sort(v.begin(), v.end());
  std::string out;
  for (const auto& [n, name] : v) out += fmt::format("{}{} {}", out.empty() ? "" : ", ", -n, name);
  return out;
}

std::string HumanBytes(uint64_t b) {
  if (b >= (uint64_t{1} << 30)) return fmt::format("{:.2f} GiB", b / double(uint64_t{1} << 30));
  if (b >= (uint64_t{1} << 20)) return fmt::format("{:.2f} MiB", b / double(1 << 20));
  if (b >= 1024) return fmt::format("{:.1f} KiB", b / 1024.0);
  return fmt::format("{} B", b);
}

std::string TypeName(const Value& v) {
  if (!v.is_array()) return gguf::ValueTypeName(v.type());
  return fmt::format("array[{}]", gguf::ValueTypeName(*v.array_type()));
}

std::string DimsString(const std::vector<int64_t>& dims) {
  std::string s;
  for (size_t i = 0; i < dims.size(); ++i) s += (i ? " x " : "") + std::to_string(dims[i]);
  return s;
}

struct TypeTotals {
  int64_t tensors = 0;
  int64_t parameters = 0;
  uint64_t bytes = 0;
};

std::map<std::string, TypeTotals> TotalsByType(const File& f) {
  std::map<std::string, TypeTotals> by;
  for (const auto& t : f.tensors()) {
    auto& tt = by[std::string(DTypeName(t.type))];
    ++tt.tensors;
    tt.parameters += t.num_elements();
    tt.bytes += t.nbytes;
  }
  return by;
}

// Stored bits per parameter (0 for no parameters).
double BitsPerWeight(uint64_t bytes, int64_t parameters) {
  return parameters > 0 ? 8.0 * static_cast<double>(bytes) / static_cast<double>(parameters) : 0.0;
}

nlohmann::json InspectJson(const File& f, size_t max_array) {
  nlohmann::json j;
  j["path"] = f.path();
  j["version"] = f.version();
  j["alignment"] = f.alignment();
  j["data_offset"] = f.data_offset();
  j["file_size"] = f.bytes().size();
  nlohmann::json md = nlohmann::json::object();
  for (const auto& kv : f.metadata()) {
    nlohmann::json e;
    e["type"] = gguf::ValueTypeName(kv.value.type());
    if (kv.value.is_array()) {
      e["element_type"] = gguf::ValueTypeName(*kv.value.array_type());
      e["length"] = kv.value.AsArray()->size();
    }
    e["value"] = kv.value.ToJson(max_array);
    md[kv.key] = std::move(e);
  }
  j["metadata"] = std::move(md);
  nlohmann::json ts = nlohmann::json::array();
  for (const auto& t : f.tensors()) {
    ts.push_back({{"name", t.name},
                  {"type", DTypeName(t.type)},
                  {"dims", t.dims},
                  {"elements", t.num_elements()},
                  {"bytes", t.nbytes},
                  {"offset", t.offset}});
  }
  j["tensors"] = std::move(ts);
  nlohmann::json by = nlohmann::json::object();
  for (const auto& [name, tt] : TotalsByType(f)) {
    by[name] = {{"tensors", tt.tensors},
                {"parameters", tt.parameters},
                {"bytes", tt.bytes},
                {"bits_per_weight", BitsPerWeight(tt.bytes, tt.parameters)}};
  }
  j["totals"] = {{"tensors", f.tensors().size()},
                 {"parameters", f.parameter_count()},
                 {"bytes", f.tensor_bytes()},
                 {"bits_per_weight", BitsPerWeight(f.tensor_bytes(), f.parameter_count())},
                 {"by_type", std::move(by)}};
  return j;
}

void InspectText(const File& f) {
  std::printf("%s: GGUF v%u, alignment %llu, data at offset %llu, %s\n", f.path().c_str(),
              f.version(), static_cast<unsigned long long>(f.alignment()),
              static_cast<unsigned long long>(f.data_offset()),
              HumanBytes(f.bytes().size()).c_str());
  std::printf("\nmetadata (%zu keys):\n", f.metadata().size());
  size_t key_w = 0;
  for (const auto& kv : f.metadata()) key_w = std::max(key_w, kv.key.size());
  for (const auto& kv : f.metadata()) {
    std::string type = TypeName(kv.value);
    if (kv.value.is_array()) type += fmt::format(" ({})", kv.value.AsArray()->size());
    std::printf("  %-*s  %-22s %s\n", static_cast<int>(key_w), kv.key.c_str(), type.c_str(),
                kv.value.ToString(8).c_str());
  }
  std::printf("\ntensors (%zu):\n", f.tensors().size());
  size_t name_w = 4;
  for (const auto& t : f.tensors()) name_w = std::max(name_w, t.name.size());
  std::printf("  %-*s  %-6s  %-20s %12s %12s\n", static_cast<int>(name_w), "name", "type", "dims",
              "bytes", "offset");
  for (const auto& t : f.tensors()) {
    std::printf("  %-*s  %-6s  %-20s %12llu %12llu\n", static_cast<int>(name_w), t.name.c_str(),
                std::string(DTypeName(t.type)).c_str(), DimsString(t.dims).c_str(),
                static_cast<unsigned long long>(t.nbytes),
                static_cast<unsigned long long>(t.offset));
  }
  std::printf("\ntotals: %zu tensors, %lld parameters, %s of tensor data, %.3f bits per weight\n",
              f.tensors().size(), static_cast<long long>(f.parameter_count()),
              HumanBytes(f.tensor_bytes()).c_str(),
              BitsPerWeight(f.tensor_bytes(), f.parameter_count()));
  for (const auto& [name, tt] : TotalsByType(f)) {
    std::printf("  %-7s %5lld tensors %14lld parameters %12s %7.3f bpw\n", name.c_str(),
                static_cast<long long>(tt.tensors), static_cast<long long>(tt.parameters),
                HumanBytes(tt.bytes).c_str(), BitsPerWeight(tt.bytes, tt.parameters));
  }
}

void RegisterInspect(CLI::App* parent, RunFn* run) {
  auto* cmd = parent->add_subcommand("inspect", "print a GGUF file's header, metadata and tensors");
  auto path = std::make_shared<std::string>();
  auto json = std::make_shared<bool>(false);
  auto max_array = std::make_shared<size_t>(1024);
  cmd->add_option("FILE", *path, "GGUF file")->required();
  cmd->add_flag("--json", *json, "print JSON instead of text");
  cmd->add_option("--max-array", *max_array,
                  "JSON: show at most this many items of each metadata array (0: all)")
      ->capture_default_str();
  cmd->callback([=] {
    *run = [=] {
      if (!fs::exists(*path)) return Fail("inspect", 2, *path + ": no such file");
      auto f = File::Open(*path);
      if (!f.ok()) return Fail("inspect", 2, f.status().message());
      if (*json) {
        const size_t cap = *max_array == 0 ? std::numeric_limits<size_t>::max() : *max_array;
        std::printf("%s\n", InspectJson(*f, cap)
                                .dump(2, ' ', false, nlohmann::json::error_handler_t::replace)
                                .c_str());
      } else {
        InspectText(*f);
      }
      return 0;
    };
  });
}

int ThreadsOrDefault(int n) { return n > 0 ? n : ThreadPool::DefaultThreads(); }

// Checks made before any work starts, so a mistyped path fails fast with exit code 2 instead of
// after minutes of quantizing.
std::optional<std::string> CheckThreads(int n) {
  if (n < 0 || n > 1024) return fmt::format("--threads {} out of range [0, 1024] (0: all cores)", n);
  return std::nullopt;
}
std::optional<std::string> CheckOutputDir(const std::string& out) {
  const fs::path parent = fs::absolute(fs::path(out)).parent_path();
  std::error_code ec;
  if (!fs::is_directory(parent, ec)) {
    return fmt::format("{}: directory {} does not exist", out, parent.string());
  }
  if (fs::is_directory(out, ec)) return fmt::format("{}: is a directory", out);
  return std::nullopt;
}

void RegisterQuantize(CLI::App* parent, RunFn* run) {
  auto* cmd = parent->add_subcommand("quantize", "convert a GGUF model's weights to another type");
  auto in = std::make_shared<std::string>();
  auto out = std::make_shared<std::string>();
  auto type = std::make_shared<std::string>();
  auto pure = std::make_shared<bool>(false);
  auto threads = std::make_shared<int>(0);
  cmd->add_option("IN", *in, "input GGUF file")->required();
  cmd->add_option("OUT", *out, "output GGUF file")->required();
  cmd->add_option("--type", *type, kTypeHelp)->required();
  cmd->add_flag("--pure", *pure, kPureHelp);
  cmd->add_option("--threads", *threads, "worker threads (default: all cores)");
  cmd->callback([=] {
    *run = [=]() -> int {
      auto t = ParseTypeFlag(*type, *pure);
      if (!t.ok()) return Fail("quantize", 2, t.status().message());
      if (!fs::exists(*in)) return Fail("quantize", 2, *in + ": no such file");
      {  // the input must parse: a bad input file is a usage error, not a runtime failure
        auto f = File::Open(*in);
        if (!f.ok()) return Fail("quantize", 2, f.status().message());
      }
      if (auto e = CheckOutputDir(*out)) return Fail("quantize", 2, *e);
      if (auto e = CheckThreads(*threads)) return Fail("quantize", 2, *e);
      ThreadPool pool(ThreadsOrDefault(*threads));
      gguf::QuantizeOptions opts;
      // A bar with ETA on a terminal, one line at the end otherwise; fallbacks always said.
      std::unique_ptr<Progress> progress;
      std::map<std::string, int> by_type;
      opts.on_tensor = [&progress, &by_type](const gguf::TensorReport& r, size_t i, size_t n) {
        if (!progress) progress = std::make_unique<Progress>("quantize", static_cast<int64_t>(n), Progress::Unit::kItems, "tensors");
        ++by_type[std::string(DTypeName(r.to))];
        if (r.fallback)
          progress->Note(fmt::format("{} {} -> {} {}: fallback: {}", r.name, DTypeName(r.from), DTypeName(r.to),
                                     DimsString(r.dims), r.note));
        progress->Set(static_cast<int64_t>(i + 1));
      };
      const auto start = std::chrono::steady_clock::now();
      auto res = gguf::QuantizeFile(*in, *out, *t, opts, &pool);
      progress.reset();
      if (!res.ok()) return Fail("quantize", ExitCodeFor(res.status()), res.status().message());
      const double secs =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      std::fprintf(stderr,
                   "quantized %s (%s of tensors) -> %s (%s, %s) in %.2f s with %d threads; "
                   "%d tensor(s) fell back to another type; %d chosen by the mix; tensors: %s\n",
                   in->c_str(), HumanBytes(res->bytes_in).c_str(), out->c_str(),
                   HumanBytes(res->bytes_out).c_str(), t->ToString().c_str(), secs,
                   pool.num_threads(), res->fallbacks, res->mixed, TypeTally(by_type).c_str());
      return 0;
    };
  });
}

void RegisterMakeRandom(CLI::App* parent, RunFn* run) {
  auto* cmd = parent->add_subcommand(
      "make-random", "write a GGUF with random weights (llama, qwen2, qwen3, gemma2, gemma3 or "
                     "phi3 layout) and a BPE or copied vocabulary");
  auto out = std::make_shared<std::string>();
  auto shape = std::make_shared<std::string>();
  auto arch = std::make_shared<std::string>();
  auto vocab_from = std::make_shared<std::string>();
  auto norm_jitter = std::make_shared<double>(0.0);
  auto type = std::make_shared<std::string>("f16");
  auto pure = std::make_shared<bool>(false);
  auto seed = std::make_shared<uint64_t>(0);
  auto threads = std::make_shared<int>(0);
  auto list = std::make_shared<bool>(false);
  cmd->add_option("OUT", *out, "output GGUF file");
  cmd->add_option("--shape", *shape,
                  "preset name (see --list-shapes), optionally with overrides "
                  "(llama-3.2-1b,layers=8), or dim=..,layers=..,heads=..,kv_heads=..,"
                  "ffn=..,vocab=..[,ctx=..,rope_base=..,eps=..,tied=0|1,head_dim=..,rot=..,"
                  "window=..,swa_pattern=..,rope_base_swa=..,attn_softcap=..,final_softcap=..,"
                  "orig_ctx=..]");
  cmd->add_option("--arch", *arch,
                  "model family: llama, qwen2, qwen3, gemma2, gemma3, phi3 (default: the "
                  "preset's, llama for a custom shape)");
  cmd->add_option("--vocab-from", *vocab_from,
                  "copy the tokenizer (tokenizer.* keys) of this GGUF file; the vocabulary size "
                  "becomes its token count");
  cmd->add_option("--norm-jitter", *norm_jitter,
                  "norm weights 1 + jitter*u, u random in [-1, 1] (default 0: all 1)");
  cmd->add_option("--type", *type, kTypeHelp)->capture_default_str();
  cmd->add_flag("--pure", *pure, kPureHelp);
  cmd->add_option("--seed", *seed, "RNG seed")->capture_default_str();
  cmd->add_option("--threads", *threads, "worker threads (default: all cores)");
  cmd->add_flag("--list-shapes", *list, "list the preset shapes and exit");
  cmd->callback([=] {
    *run = [=]() -> int {
      if (*list) {
        for (const auto& p : gguf::ModelPresets()) {
          std::printf("%-16s %-7s %6.1fM params  %s\n", p.name.c_str(), p.arch.c_str(),
                      p.ParameterCount() / 1e6, p.ToString().c_str());
        }
        return 0;
      }
      if (shape->empty()) return Fail("make-random", 2, "--shape is required");
      if (out->empty()) return Fail("make-random", 2, "OUT (the output file) is required");
      auto t = ParseTypeFlag(*type, *pure);
      if (!t.ok()) return Fail("make-random", 2, t.status().message());
      auto s = gguf::ParseShape(*shape, *arch);
      if (!s.ok()) return Fail("make-random", 2, s.status().message());
      if (auto e = CheckOutputDir(*out)) return Fail("make-random", 2, *e);
      if (auto e = CheckThreads(*threads)) return Fail("make-random", 2, *e);
      ThreadPool pool(ThreadsOrDefault(*threads));
      gguf::MakeRandomOptions opts;
      opts.seed = *seed;
      opts.vocab_from = *vocab_from;
      opts.norm_jitter = *norm_jitter;
      // A bar with ETA on a terminal, one line at the end otherwise.
      std::unique_ptr<Progress> progress;
      std::map<std::string, int> by_type;
      opts.on_tensor = [&progress, &by_type](const std::string&, DType type, size_t i, size_t n) {
        if (!progress) progress = std::make_unique<Progress>("make-random", static_cast<int64_t>(n), Progress::Unit::kItems, "tensors");
        ++by_type[std::string(DTypeName(type))];
        progress->Set(static_cast<int64_t>(i + 1));
      };
      const auto start = std::chrono::steady_clock::now();
      auto res = gguf::MakeRandomModel(*s, *t, *out, opts, &pool);
      progress.reset();
      if (!res.ok()) return Fail("make-random", ExitCodeFor(res.status()), res.status().message());
      const double secs =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      for (const auto& note : res->notes) std::fprintf(stderr, "fallback: %s\n", note.c_str());
      std::fprintf(stderr,
                   "wrote %s: %s %s (%s), %zu tensors, %lld parameters, %s, %s (%s), in %.2f s\n",
                   out->c_str(), s->arch.c_str(), s->name.c_str(), s->ToString().c_str(),
                   res->tensors, static_cast<long long>(res->parameters),
                   HumanBytes(res->tensor_bytes).c_str(), t->ToString().c_str(),
                   TypeTally(by_type).c_str(), secs);
      return 0;
    };
  });
}

// `pad IN OUT --layers N [--ffn F]`: see gguf/pad_model.h.
void RegisterPad(CLI::App* parent, RunFn* run) {
  auto* cmd = parent->add_subcommand(
      "pad", "append zero-output blocks (and widen the FFN) to a llama model: same logits, "
             "more compute");
  auto in = std::make_shared<std::string>();
  auto out = std::make_shared<std::string>();
  auto layers = std::make_shared<int64_t>(0);
  auto ffn = std::make_shared<int64_t>(0);
  cmd->add_option("IN", *in, "input GGUF file (llama architecture)")->required();
  cmd->add_option("OUT", *out, "output GGUF file")->required();
  cmd->add_option("--layers", *layers, "blocks to append (>= 0)")->required();
  cmd->add_option("--ffn", *ffn, "FFN width of every block (>= the model's; default: unchanged)");
  cmd->callback([=] {
    *run = [=]() -> int {
      if (*layers < 0) return Fail("pad", 2, fmt::format("--layers must be >= 0, got {}", *layers));
      if (*ffn < 0) return Fail("pad", 2, fmt::format("--ffn must be >= 0, got {}", *ffn));
      if (!fs::exists(*in)) return Fail("pad", 2, *in + ": no such file");
      if (auto e = CheckOutputDir(*out)) return Fail("pad", 2, *e);
      const std::string dir = fs::absolute(fs::path(*out)).parent_path().string();
      if (::access(dir.c_str(), W_OK) != 0) {
        return Fail("pad", 2, fmt::format("{}: directory {} is not writable", *out, dir));
      }
      gguf::PadOptions opts;
      opts.extra_layers = *layers;
      opts.ffn = *ffn;
      // A bar with ETA on a terminal, one line at the end otherwise.
      std::unique_ptr<Progress> progress;
      opts.on_tensor = [&progress](const std::string&, DType, size_t i, size_t n) {
        if (!progress) progress = std::make_unique<Progress>("pad", static_cast<int64_t>(n), Progress::Unit::kItems, "tensors");
        progress->Set(static_cast<int64_t>(i + 1));
      };
      const auto start = std::chrono::steady_clock::now();
      auto res = gguf::PadModel(*in, *out, opts);
      progress.reset();
      if (!res.ok()) return Fail("pad", ExitCodeFor(res.status()), res.status().message());
      const double secs =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      std::fprintf(stderr,
                   "padded %s (%lld blocks, ffn %lld, %lld parameters) -> %s (%lld blocks, ffn "
                   "%lld, %lld parameters, %zu tensors, %s) in %.2f s\n",
                   in->c_str(), static_cast<long long>(res->layers_in),
                   static_cast<long long>(res->ffn_in),
                   static_cast<long long>(res->parameters_in), out->c_str(),
                   static_cast<long long>(res->layers_out), static_cast<long long>(res->ffn_out),
                   static_cast<long long>(res->parameters_out), res->tensors_out,
                   HumanBytes(res->tensor_bytes_out).c_str(), secs);
      return 0;
    };
  });
}

}  // namespace

void RegisterGguf(CLI::App& app, RunFn* run) {
  auto* cmd = app.add_subcommand("gguf", "inspect, quantize, create and pad GGUF files");
  cmd->require_subcommand(1);
  RegisterInspect(cmd, run);
  RegisterQuantize(cmd, run);
  RegisterMakeRandom(cmd, run);
  RegisterPad(cmd, run);
}

}  // namespace tarmac::apps
