// Property test of the JSON Schema path: for every schema of schemas.json, random token
// walks through the matcher over real vocabularies must end in JSON that python3-jsonschema
// (an oracle independent of this code) parses and validates; random corruptions of those
// outputs that the oracle rejects must be rejected by the matcher too.

#include <cstdio>
#include <fstream>
#include <random>
#include <sstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "grammar/json_schema.h"
#include "grammar_test_util.h"

namespace tarmac::grammar {
namespace {

using testing::WalkOptions;

const std::string kHere = TARMAC_SOURCE_DIR "/tests/grammar";

struct Sampled {
  std::string name;
  nlohmann::ordered_json schema;
  std::vector<std::string> outputs;
  std::vector<std::string> mutants;
  std::vector<bool> mutant_accepted;  // by the matcher
};

std::string Hex(const std::string& s) {
  static const char* d = "0123456789abcdef";
  std::string out;
  for (unsigned char c : s) {
    out.push_back(d[c >> 4]);
    out.push_back(d[c & 15]);
  }
  return out;
}

std::vector<std::string> Mutants(const std::string& s, std::mt19937_64* rng) {
  std::vector<std::string> out;
  if (s.empty()) return out;
  auto at = [&](size_t n) { return std::uniform_int_distribution<size_t>(0, n - 1)(*rng); };
  const std::string alphabet = "{}[]\":,0123456789-.eE truefalsnl\\xé";
  out.push_back(s.substr(0, at(s.size())));                      // truncated
  std::string r = s;
  r[at(r.size())] = alphabet[at(alphabet.size())];               // one byte replaced
  out.push_back(r);
  std::string ins = s;
  ins.insert(at(ins.size() + 1), 1, alphabet[at(alphabet.size())]);  // one byte inserted
  out.push_back(ins);
  std::string del = s;
  del.erase(at(del.size()), 1);                                  // one byte deleted
  out.push_back(del);
  return out;
}

// Runs the oracle over all cases; returns per case, per instance (outputs then mutants)
// the oracle's verdict.
nlohmann::json RunOracle(const std::string& python, const std::vector<Sampled>& cases, const std::string& tag) {
  nlohmann::json in = nlohmann::json::array();
  for (const Sampled& c : cases) {
    nlohmann::json inst = nlohmann::json::array();
    for (const std::string& o : c.outputs) inst.push_back(Hex(o));
    for (const std::string& m : c.mutants) inst.push_back(Hex(m));
    in.push_back({{"schema", c.schema}, {"instances", inst}});
  }
  const std::string in_path = std::string(TARMAC_BINARY_DIR) + "/grammar_oracle_in_" + tag + ".json";
  const std::string out_path = std::string(TARMAC_BINARY_DIR) + "/grammar_oracle_out_" + tag + ".json";
  std::ofstream(in_path) << in.dump();
  const std::string cmd = python + " '" + kHere + "/validate_json.py' '" + in_path + "' '" + out_path + "'";
  EXPECT_EQ(std::system(cmd.c_str()), 0) << cmd;
  std::ifstream f(out_path);
  return nlohmann::json::parse(f);
}

void SampleAndValidate(const std::string& vocab_path, int walks, int brute_force_walks, const std::string& tag) {
  const std::string python = testing::PythonWithJsonschema();
  if (python.empty()) GTEST_SKIP() << "python3 with jsonschema not available (apt-get install python3-jsonschema)";
  const testing::LoadedVocab* vocab = testing::Vocab(vocab_path);
  if (vocab == nullptr) GTEST_SKIP() << vocab_path << " absent";
  std::ifstream f(kHere + "/schemas.json");
  const auto table = nlohmann::ordered_json::parse(f);
  ASSERT_GE(table.size(), 30u);

  std::mt19937_64 rng(12345);
  std::vector<Sampled> cases;
  for (const auto& entry : table) {
    Sampled c;
    c.name = entry["name"];
    c.schema = entry["schema"];
    SCOPED_TRACE(c.name);
    auto g = GrammarFromJsonSchema(c.schema);
    ASSERT_TRUE(g.ok()) << c.name << ": " << g.status().ToString();
    auto compiled = testing::MustCompile(*g, vocab->table);
    ASSERT_NE(compiled, nullptr);
    int ended = 0;
    for (int w = 0; w < walks; ++w) {
      GrammarMatcher m(compiled);
      WalkOptions opts;
      opts.check_brute_force = w < brute_force_walks;
      opts.max_tokens = 1500;
      std::vector<TokenBitmask> masks;
      opts.masks = &masks;
      auto out = testing::RandomWalk(&m, &rng, opts);
      if (!out) continue;
      // Rolling back (the end-of-generation token and) k tokens restores the mask seen then.
      const int32_t k = static_cast<int32_t>(rng() % (m.num_accepted() + 1));
      m.Rollback(k);
      if (m.num_accepted() < static_cast<int32_t>(masks.size())) {
        TokenBitmask again;
        m.FillNextTokenMask(&again);
        EXPECT_EQ(again.AllowedIds(), masks[m.num_accepted()].AllowedIds()) << c.name << ": rollback of " << k;
      }
      ++ended;
      c.outputs.push_back(*out);
      for (std::string& mu : Mutants(*out, &rng)) {
        c.mutant_accepted.push_back(testing::Matches(compiled, mu));
        c.mutants.push_back(std::move(mu));
      }
    }
    EXPECT_GE(ended, walks / 2) << c.name << ": most walks should finish";
    cases.push_back(std::move(c));
  }

  const nlohmann::json verdicts = RunOracle(python, cases, tag);
  ASSERT_EQ(verdicts.size(), cases.size());
  int outputs = 0, rejected_mutants = 0;
  for (size_t i = 0; i < cases.size(); ++i) {
    const Sampled& c = cases[i];
    const auto& v = verdicts[i];
    for (size_t k = 0; k < c.outputs.size(); ++k, ++outputs) {
      EXPECT_TRUE(v[k]["parses"].get<bool>() && v[k]["valid"].get<bool>())
          << c.name << ": output " << c.outputs[k] << " fails the oracle: " << v[k]["error"].get<std::string>();
    }
    for (size_t k = 0; k < c.mutants.size(); ++k) {
      const auto& r = v[c.outputs.size() + k];
      const bool oracle_ok = r["parses"].get<bool>() && r["valid"].get<bool>();
      if (oracle_ok) continue;
      ++rejected_mutants;
      EXPECT_FALSE(c.mutant_accepted[k]) << c.name << ": matcher accepts " << c.mutants[k]
                                         << ", which the oracle rejects: " << r["error"].get<std::string>();
    }
  }
  std::printf("%s: %zu schemas, %d outputs validated, %d invalid corruptions rejected\n", tag.c_str(), cases.size(),
              outputs, rejected_mutants);
}

TEST(GrammarSchemaSampling, Wp11mVocabulary) { SampleAndValidate(testing::kWp11m, 24, 3, "wp11m"); }

TEST(GrammarSchemaSampling, Llama3Vocabulary) { SampleAndValidate(testing::kLlama3Vocab, 6, 0, "llama3"); }

}  // namespace
}  // namespace tarmac::grammar
