// Runs the real tarmac binary: `tarmac template render` with --template and -m (a small GGUF
// written here, carrying tokenizer.chat_template and a vocabulary), exact bytes on stdout, and
// exit code 2 with a clear message for bad input.
#include <cstdint>
#include <fstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "common/test_util.h"

namespace tarmac {
namespace {

class TemplateCliTest : public testing::TempDirTest {
 protected:
  testing::RunResult Run(std::vector<std::string> args) {
    args.insert(args.begin(), {"template", "render"});
    return testing::RunTarmac(std::move(args), dir_.string());
  }
  std::string Write(const std::string& name, const std::string& content) {
    std::ofstream(Path(name), std::ios::binary) << content;
    return Path(name);
  }
};

// GGUF v3 with no tensors: tokenizer.chat_template, tokenizer.ggml.tokens, bos/eos ids.
std::string TinyGguf(const std::string& chat_template) {
  std::string b;
  auto u32 = [&](uint32_t v) { b.append(reinterpret_cast<const char*>(&v), 4); };
  auto u64 = [&](uint64_t v) { b.append(reinterpret_cast<const char*>(&v), 8); };
  auto str = [&](const std::string& s) {
    u64(s.size());
    b += s;
  };
  b += "GGUF";
  u32(3);
  u64(0);  // tensors
  u64(4);  // key/values
  str("tokenizer.chat_template");
  u32(8);  // string
  str(chat_template);
  str("tokenizer.ggml.tokens");
  u32(9);  // array
  u32(8);  // of string
  u64(3);
  str("<unk>");
  str("<|bos|>");
  str("<|eos|>");
  str("tokenizer.ggml.bos_token_id");
  u32(4);  // uint32
  u32(1);
  str("tokenizer.ggml.eos_token_id");
  u32(4);
  u32(2);
  while (b.size() % 32) b += '\0';
  return b;
}

const char* kTemplate =
    "{{ bos_token }}{% for m in messages %}<|{{ m.role }}|>\n{{ m.content | trim }}{{ eos_token }}\n"
    "{% endfor %}{% if add_generation_prompt %}<|assistant|>\n{% endif %}";

TEST_F(TemplateCliTest, RendersFromTemplateFileExactBytes) {
  auto tmpl = Write("t.jinja", kTemplate);
  auto input = Write("in.json", R"({"messages": [{"role": "user", "content": " Hi ✓ "}],
    "add_generation_prompt": true, "bos_token": "<s>", "eos_token": "</s>"})");
  auto r = Run({"--template", tmpl, "--input", input});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "<s><|user|>\nHi ✓</s>\n<|assistant|>\n");  // no newline added by the CLI
}

TEST_F(TemplateCliTest, RendersFromModelWithVocabSpecialTokens) {
  auto model = Write("m.gguf", TinyGguf(kTemplate));
  auto input = Write("in.json", R"({"messages": [{"role": "user", "content": "Hello"}], "add_generation_prompt": false})");
  auto r = Run({"-m", model, "--input", input});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "<|bos|><|user|>\nHello<|eos|>\n");
  // Tokens given in the input win over the model's.
  input = Write("in2.json", R"({"messages": [], "bos_token": "B"})");
  r = Run({"-m", model, "--input", input});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "B");
}

TEST_F(TemplateCliTest, FixedNow) {
  auto tmpl = Write("t.jinja", "{{ strftime_now('%d %b %Y') }}");
  auto input = Write("in.json", "{}");
  auto r = Run({"--template", tmpl, "--input", input, "--now", "2024-07-26"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "26 Jul 2024");
}

TEST_F(TemplateCliTest, BadInputExitsTwoWithClearMessage) {
  auto good = Write("t.jinja", kTemplate);
  auto input = Write("in.json", R"({"messages": []})");
  auto bad_json = Write("bad.json", "{not json");
  auto bad_tmpl = Write("bad.jinja", "line1\n{% for m in messages %}\n{{ m.role }");
  auto raising = Write("raise.jinja", "{{ raise_exception('Conversation roles must alternate') }}");

  auto r = Run({"--template", good, "--input", bad_json});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("not valid JSON"), std::string::npos) << r.err;

  r = Run({"--template", bad_tmpl, "--input", input});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("line 3, column"), std::string::npos) << r.err;

  r = Run({"--template", raising, "--input", input});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("Conversation roles must alternate"), std::string::npos) << r.err;

  r = Run({"--template", Path("missing.jinja"), "--input", input});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("missing.jinja"), std::string::npos) << r.err;

  r = Run({"--input", input});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("-m MODEL or --template FILE"), std::string::npos) << r.err;

  r = Run({"-m", testing::kWp11m, "--input", input});  // a model without a chat template
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("no chat template"), std::string::npos) << r.err;

  auto not_object = Write("arr.json", "[1, 2]");
  r = Run({"--template", good, "--input", not_object});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("JSON object"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace tarmac
