#include "tokenizer/tokenizer.h"

#include <fstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tokenizer/detokenizer.h"
#include "base/utf8.h"
#include "tokenizer/vocab_gguf.h"

namespace tarmac::tok {
namespace {

const std::string kRepo = TARMAC_SOURCE_DIR;
const std::string kShared = TARMAC_SHARED_DIR;

bool Exists(const std::string& p) { return std::ifstream(p).good(); }

std::unique_ptr<Tokenizer> LoadTokenizer(const std::string& path) {
  auto file = gguf::File::Open(path);
  EXPECT_TRUE(file.ok()) << file.status().ToString();
  if (!file.ok()) return nullptr;
  auto vocab = LoadVocab(*file);
  EXPECT_TRUE(vocab.ok()) << vocab.status().ToString();
  if (!vocab.ok()) return nullptr;
  auto tok = Tokenizer::Create(std::move(vocab).value());
  EXPECT_TRUE(tok.ok()) << tok.status().ToString();
  return tok.ok() ? std::move(tok).value() : nullptr;
}

nlohmann::json ReadJson(const std::string& path) {
  std::ifstream in(path);
  return nlohmann::json::parse(in);
}

// Streams ids through the incremental detokenizer; every chunk must be valid UTF-8 and the
// whole must equal Decode (with invalid bytes replaced by U+FFFD).
void ExpectStreamMatchesDecode(const Tokenizer& tok, const std::vector<int32_t>& ids) {
  StreamDetokenizer detok(&tok);
  std::string streamed;
  for (int32_t id : ids) {
    std::string chunk = detok.Push(id);
    EXPECT_TRUE(IsValidUtf8(chunk)) << "chunk after token " << id;
    streamed += chunk;
  }
  streamed += detok.Finish();
  EXPECT_EQ(streamed, SanitizeUtf8(tok.Decode(ids)));
}

TEST(UnicodeTest, ByteMapIsABijection) {
  for (int b = 0; b < 256; ++b) {
    const std::string& s = ByteToUnicode(static_cast<uint8_t>(b));
    size_t p = 0;
    const uint32_t cp = DecodeUtf8(s, &p);
    EXPECT_EQ(p, s.size());
    EXPECT_EQ(UnicodeToByte(cp), b);
    EXPECT_NE(s, " ");
  }
  EXPECT_EQ(ByteToUnicode(' '), "\xC4\xA0");  // 'Ġ'
  EXPECT_EQ(ByteToUnicode('a'), "a");
}

TEST(UnicodeTest, IncompleteSuffix) {
  const std::string rocket = "\xF0\x9F\x9A\x80";
  EXPECT_EQ(IncompleteUtf8Suffix("abc"), 0);
  EXPECT_EQ(IncompleteUtf8Suffix("a" + rocket), 0);
  EXPECT_EQ(IncompleteUtf8Suffix("a" + rocket.substr(0, 1)), 1);
  EXPECT_EQ(IncompleteUtf8Suffix("a" + rocket.substr(0, 3)), 3);
  EXPECT_EQ(IncompleteUtf8Suffix("a\x80"), 0);  // stray continuation: not held back
  EXPECT_TRUE(IsValidUtf8("caf\xC3\xA9"));
  EXPECT_FALSE(IsValidUtf8("\xC0\xAF"));          // overlong
  EXPECT_FALSE(IsValidUtf8("\xED\xA0\x80"));      // surrogate
  EXPECT_FALSE(IsValidUtf8(rocket.substr(0, 2)));  // truncated
}

TEST(TokenizerTest, WarAndPeaceGoldenPromptIds) {
  auto tok = LoadTokenizer(kRepo + "/models/wp-11m-f16.gguf");
  ASSERT_NE(tok, nullptr);
  for (const char* golden : {"/tests/data/wp-11m-f16.golden.json", "/tests/data/wp-1m-f16.golden.json"}) {
    auto j = ReadJson(kRepo + golden);
    for (const auto& c : j["cases"]) {
      const std::string prompt = c["prompt"];
      const auto want = c["tokens"].get<std::vector<int32_t>>();
      EXPECT_EQ(tok->Encode(prompt), want) << prompt;
      EXPECT_EQ(tok->Decode(want), prompt);
      ExpectStreamMatchesDecode(*tok, want);
    }
  }
}

TEST(TokenizerTest, ByteLevelRoundTripsArbitraryText) {
  auto tok = LoadTokenizer(kRepo + "/models/wp-11m-f16.gguf");
  ASSERT_NE(tok, nullptr);
  for (const std::string& text : std::vector<std::string>{"", " ", "   leading", "trailing   ", "a\n\n\tb", "Unicode: café, 日本語, Привет, 🚀🔥",
        "numbers 1234567890", "don't won't it's", std::string("bad \xFF\xFE utf8 \xC3")}) {
    auto ids = tok->Encode(text);
    EXPECT_EQ(tok->Decode(ids), text);
    ExpectStreamMatchesDecode(*tok, ids);
  }
}

TEST(TokenizerTest, Llama2SentencePieceGolden) {
  const std::string model = kShared + "/models/llama-2-tiny-random.gguf";
  if (!Exists(model)) GTEST_SKIP() << model << " absent";
  auto tok = LoadTokenizer(model);
  ASSERT_NE(tok, nullptr);
  auto cases = ReadJson(kRepo + "/tests/data/llama-2-tiny-random.tokenizer-golden.json");
  ASSERT_GE(cases.size(), 20u);
  EncodeOptions no_bos;
  no_bos.add_special = false;
  for (const auto& c : cases) {
    const std::string text = c["text"];
    const auto want = c["ids"].get<std::vector<int32_t>>();
    EXPECT_EQ(tok->Encode(text, no_bos), want) << text;
    EXPECT_EQ(tok->Decode(want), text) << text;
    ExpectStreamMatchesDecode(*tok, want);
  }
  // BOS is added by default for SentencePiece vocabularies.
  EXPECT_EQ(tok->Encode("a").front(), 1);
  // Special-token text is only recognised when asked.
  EncodeOptions special = no_bos;
  special.parse_special = true;
  EXPECT_EQ(tok->Encode("<s>a", special), (std::vector<int32_t>{1, 263}));
}

TEST(TokenizerTest, Llama3BpeVocabulary) {
  const std::string model = kShared + "/models/llama3.2-vocab-random.gguf";
  if (!Exists(model)) GTEST_SKIP() << model << " absent";
  auto tok = LoadTokenizer(model);
  ASSERT_NE(tok, nullptr);
  EncodeOptions no_bos;
  no_bos.add_special = false;
  EXPECT_EQ(tok->Encode("Hello world", no_bos), (std::vector<int32_t>{9906, 1917}));
  for (const std::string& text : std::vector<std::string>{"Hello world", "  multiple   spaces\n\nand lines", "numbers 1234567 split in threes",
        "Unicode: café, 日本語, 🚀", "I'm SHOUTING, you'RE not"}) {
    auto ids = tok->Encode(text, no_bos);
    EXPECT_EQ(tok->Decode(ids), text);
    ExpectStreamMatchesDecode(*tok, ids);
  }
  // Digits are split in groups of at most three by the llama-bpe pre-tokenizer.
  auto ids = tok->Encode("1234567", no_bos);
  EXPECT_EQ(ids.size(), 3u);
}

TEST(TokenizerTest, RejectsBadVocabularies) {
  Vocab empty;
  EXPECT_FALSE(Tokenizer::Create(empty).ok());
  Vocab missing_bytes;
  missing_bytes.tokens = {"a", "b"};
  auto r = Tokenizer::Create(missing_bytes);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("byte"), std::string::npos);
  Vocab bad_pre;
  for (int b = 0; b < 256; ++b) bad_pre.tokens.push_back(ByteToUnicode(static_cast<uint8_t>(b)));
  bad_pre.pre = "no-such-pre";
  r = Tokenizer::Create(bad_pre);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("no-such-pre"), std::string::npos);
  Vocab bad_id = bad_pre;
  bad_id.pre = "gpt-2";
  bad_id.eos_id = 9999;
  EXPECT_FALSE(Tokenizer::Create(bad_id).ok());
}

}  // namespace
}  // namespace tarmac::tok
