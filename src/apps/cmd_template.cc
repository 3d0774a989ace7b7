// `tarmac template render`: renders a chat template (from a GGUF model's
// tokenizer.chat_template, or from a file) with variables from a JSON file and prints the exact
// bytes, without a trailing newline, for inspection and tests.
#include <cstdio>
#include <fstream>
#include <memory>
#include <sstream>

#include <nlohmann/json.hpp>

#include "apps/commands.h"
#include "chat_template/chat_template.h"
#include "gguf/gguf_file.h"

namespace tarmac::apps {
namespace {

struct TemplateArgs {
  std::string model;
  std::string template_file;
  std::string input;
  std::string now;  // "YYYY-MM-DD HH:MM:SS": fixes strftime_now()
};

int Fail(int code, const std::string& msg) {
  std::fprintf(stderr, "tarmac template render: %s\n", msg.c_str());
  return code;
}

bool ReadFile(const std::string& path, std::string* out) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return false;
  std::ostringstream ss;
  ss << f.rdbuf();
  *out = ss.str();
  return true;
}

// Token text for the id stored under `id_key`, or "" if the model does not say.
std::string SpecialToken(const gguf::File& f, const std::vector<std::string>& tokens, const char* id_key) {
  auto id = f.GetUint(id_key);
  if (!id.ok() || *id >= tokens.size()) return "";
  return tokens[*id];
}

int RunRender(const TemplateArgs& a) {
  std::string source;
  nlohmann::ordered_json vars;
  std::string input_text;
  if (!ReadFile(a.input, &input_text)) return Fail(2, a.input + ": cannot read input file");
  try {
    vars = nlohmann::ordered_json::parse(input_text);
  } catch (const nlohmann::json::exception& e) {
    return Fail(2, a.input + ": not valid JSON: " + e.what());
  }
  if (!vars.is_object()) return Fail(2, a.input + ": the input must be a JSON object (its keys become template variables)");

  if (!a.model.empty()) {
    auto f = gguf::File::Open(a.model);
    if (!f.ok()) return Fail(2, f.status().message());
    auto tmpl = f->GetString("tokenizer.chat_template");
    if (!tmpl.ok()) return Fail(2, a.model + ": no chat template (" + tmpl.status().message() + ")");
    source = *tmpl;
    if (!vars.contains("bos_token") || !vars.contains("eos_token")) {
      auto tokens = f->GetStringArray("tokenizer.ggml.tokens");
      std::vector<std::string> toks = tokens.ok() ? *tokens : std::vector<std::string>{};
      if (!vars.contains("bos_token")) vars["bos_token"] = SpecialToken(*f, toks, "tokenizer.ggml.bos_token_id");
      if (!vars.contains("eos_token")) vars["eos_token"] = SpecialToken(*f, toks, "tokenizer.ggml.eos_token_id");
    }
  } else if (!ReadFile(a.template_file, &source)) {
    return Fail(2, a.template_file + ": cannot read template file");
  }

  chat_template::RenderOptions opts;
  if (!a.now.empty()) {
    std::tm tm{};
    int y, mo, d, h = 0, mi = 0, s = 0;
    int n = std::sscanf(a.now.c_str(), "%d-%d-%d %d:%d:%d", &y, &mo, &d, &h, &mi, &s);
    if (n != 3 && n != 6) return Fail(2, "--now '" + a.now + "': expected YYYY-MM-DD or 'YYYY-MM-DD HH:MM:SS'");
    tm.tm_year = y - 1900;
    tm.tm_mon = mo - 1;
    tm.tm_mday = d;
    tm.tm_hour = h;
    tm.tm_min = mi;
    tm.tm_sec = s;
    opts.now = tm;
  }
  auto t = chat_template::ChatTemplate::Parse(source);
  if (!t.ok()) return Fail(2, t.status().message());
  auto out = t->Render(vars, opts);
  if (!out.ok()) return Fail(2, out.status().message());
  std::fwrite(out->data(), 1, out->size(), stdout);
  std::fflush(stdout);
  return 0;
}

}  // namespace

void RegisterTemplate(CLI::App& app, RunFn* run) {
  auto* cmd = app.add_subcommand("template", "chat templates (Jinja, as in GGUF files)");
  cmd->require_subcommand(1);
  auto* render = cmd->add_subcommand("render", "render a chat template with JSON variables; prints the exact prompt");
  auto args = std::make_shared<TemplateArgs>();
  auto* m = render->add_option("-m,--model", args->model, "GGUF model whose tokenizer.chat_template to use");
  auto* t = render->add_option("--template", args->template_file, "file holding the Jinja template source");
  m->excludes(t);
  render->add_option("--input", args->input,
                     "JSON object file: {\"messages\": [...], \"tools\": [...], \"add_generation_prompt\": true, ...}")
      ->required();
  render->add_option("--now", args->now, "fixed date for strftime_now(): YYYY-MM-DD or 'YYYY-MM-DD HH:MM:SS'");
  render->callback([=] {
    *run = [=] {
      if (args->model.empty() && args->template_file.empty()) {
        return Fail(2, "give the template with -m MODEL or --template FILE");
      }
      return RunRender(*args);
    };
  });
}

}  // namespace tarmac::apps
