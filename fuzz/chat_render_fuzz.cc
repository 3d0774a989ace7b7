// libFuzzer target for the chat-template renderer over hostile message content: the input is a
// /v1/chat/completions body (messages with content parts, tool calls and tool results, tools),
// validated by the server's parser and then rendered and encoded through real chat templates
// as a model would (router::ChatFormatter: special-token text in messages swapped out and back,
// encoding with literal ranges). An optional top-level "template": N (removed before parsing)
// picks the template: tests/chat_template/templates/*.jinja, then ../shared's real templates.
// Any input must render or fail with a status; nothing may crash, hang, leak or throw.
// The tokenizer is the Llama-3.2 vocabulary from ../shared/models when present (it has the
// special tokens templates write), else models/wp-11m-f16.gguf.
// Run: scripts/fuzz.sh chat_render SECONDS.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "gguf/gguf_file.h"
#include "router/chat_format.h"
#include "server/openai_request.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/vocab_gguf.h"

namespace {

namespace fs = std::filesystem;
using tarmac::router::ChatFormatter;

std::vector<ChatFormatter> LoadFormatters() {
  std::vector<fs::path> files;
  for (const char* dir : {TARMAC_SOURCE_DIR "/tests/chat_template/templates", TARMAC_SHARED_DIR "/data/chat-templates"}) {
    std::vector<fs::path> here;
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(dir, ec))
      if (e.path().extension() == ".jinja") here.push_back(e.path());
    std::sort(here.begin(), here.end());
    files.insert(files.end(), here.begin(), here.end());
  }
  std::vector<ChatFormatter> out;
  for (const auto& p : files) {
    std::ifstream in(p);
    std::stringstream ss;
    ss << in.rdbuf();
    auto f = ChatFormatter::Create(ss.str(), "<s>", "</s>");
    if (f.ok()) out.push_back(std::move(f).value());
  }
  if (out.empty()) {
    std::fprintf(stderr, "chat render fuzz: no templates found\n");
    std::abort();
  }
  return out;
}

std::unique_ptr<tarmac::tok::Tokenizer> LoadTokenizer() {
  for (const char* path : {TARMAC_SHARED_DIR "/models/llama3.2-vocab-random.gguf", TARMAC_SOURCE_DIR "/models/wp-11m-f16.gguf"}) {
    if (!fs::exists(path)) continue;
    auto file = tarmac::gguf::File::Open(path);
    if (!file.ok()) continue;
    auto vocab = tarmac::tok::LoadVocab(*file);
    if (!vocab.ok()) continue;
    auto tok = tarmac::tok::Tokenizer::Create(std::move(vocab).value());
    if (tok.ok()) return std::move(tok).value();
  }
  std::fprintf(stderr, "chat render fuzz: no tokenizer found\n");
  std::abort();
}

const std::vector<ChatFormatter>* formatters_ptr = nullptr;
const tarmac::tok::Tokenizer* tokenizer_ptr = nullptr;

}  // namespace

// Loading 45 templates and a 128k vocabulary under ASan takes seconds: done here, outside the
// per-input timeout.
extern "C" int LLVMFuzzerInitialize(int*, char***) {
  static const std::vector<ChatFormatter> formatters = LoadFormatters();
  static const std::unique_ptr<tarmac::tok::Tokenizer> tokenizer = LoadTokenizer();
  formatters_ptr = &formatters;
  tokenizer_ptr = tokenizer.get();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::vector<ChatFormatter>& formatters = *formatters_ptr;
  const tarmac::tok::Tokenizer* tokenizer = tokenizer_ptr;
  std::string body(reinterpret_cast<const char*>(data), size);
  size_t which = 0;
  try {
    auto j = nlohmann::ordered_json::parse(body, nullptr, false);
    if (j.is_object() && j.contains("template") && j["template"].is_number_unsigned()) {
      which = j["template"].get<uint64_t>() % formatters.size();
      j.erase("template");
      body = j.dump();
    }
    tarmac::server::GenRequest req;
    if (tarmac::server::ParseGenRequest(body, tarmac::server::ApiKind::kChat, &req)) return 0;
    const ChatFormatter& f = formatters[which];
    const auto& spec = req.spec;
    auto text = f.Render(spec.messages, spec.tools, spec.add_generation_prompt);
    auto ids = f.Encode(spec.messages, spec.tools, spec.add_generation_prompt, *tokenizer);
    if (text.ok() != ids.ok() && text.ok() &&
        ids.status().message().find("beyond recognition") == std::string::npos) {
      std::fprintf(stderr, "chat render fuzz: template %zu renders but does not encode: %s\n", which,
                   ids.status().ToString().c_str());
      std::abort();
    }
  } catch (const std::exception& ex) {
    std::fprintf(stderr, "chat render fuzz: exception escaped (template %zu): %s\n", which, ex.what());
    std::abort();
  }
  return 0;
}
