// Runs the real `tarmac gguf ...` binary: inspect (text and JSON), quantize, make-random, and
// the exit code 2 + no output file contract for bad input.
#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "common/test_util.h"
#include "gguf/gguf_file.h"

namespace tarmac {
namespace {

namespace fs = std::filesystem;

const std::string kModel = TARMAC_SOURCE_DIR "/models/wp-11m-f16.gguf";

class GgufCliTest : public testing::TempDirTest {
 protected:
  testing::RunResult Run(std::vector<std::string> args) {
    return testing::RunTarmac(std::move(args), dir_.string());
  }
};

TEST_F(GgufCliTest, InspectText) {
  testing::RunResult r = Run({"gguf", "inspect", kModel});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("GGUF v3"), std::string::npos);
  EXPECT_NE(r.out.find("general.architecture"), std::string::npos);
  EXPECT_NE(r.out.find("\"llama\""), std::string::npos);
  // Long arrays are abbreviated, with their length.
  EXPECT_NE(r.out.find("array[string] (2048)"), std::string::npos);
  EXPECT_NE(r.out.find("(2040 more)"), std::string::npos);
  EXPECT_NE(r.out.find("blk.5.ffn_down.weight"), std::string::npos);
  EXPECT_NE(r.out.find("57 tensors"), std::string::npos);
  EXPECT_NE(r.out.find("1024 x 384"), std::string::npos);
}

TEST_F(GgufCliTest, InspectJson) {
  testing::RunResult r = Run({"gguf", "inspect", "--json", "--max-array", "100", kModel});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  auto f = gguf::File::Open(kModel);
  ASSERT_TRUE(f.ok());
  EXPECT_EQ(j["version"], 3);
  EXPECT_EQ(j["alignment"], 32);
  EXPECT_EQ(j["metadata"]["general.architecture"]["value"], "llama");
  EXPECT_EQ(j["metadata"]["llama.embedding_length"]["value"], 384);
  const auto& toks = j["metadata"]["tokenizer.ggml.tokens"];
  EXPECT_EQ(toks["type"], "array");
  EXPECT_EQ(toks["element_type"], "string");
  EXPECT_EQ(toks["length"], 2048);
  EXPECT_EQ(toks["value"].size(), 101u);  // 100 items + "... (1948 more)"
  ASSERT_EQ(j["tensors"].size(), f->tensors().size());
  for (size_t i = 0; i < f->tensors().size(); ++i) {
    const auto& t = f->tensors()[i];
    const auto& jt = j["tensors"][i];
    EXPECT_EQ(jt["name"], t.name);
    EXPECT_EQ(jt["dims"].get<std::vector<int64_t>>(), t.dims);
    EXPECT_EQ(jt["type"], std::string(DTypeName(t.type)));
    EXPECT_EQ(jt["bytes"], t.nbytes);
    EXPECT_EQ(jt["offset"], t.offset);
  }
  EXPECT_EQ(j["totals"]["tensors"], 57);
  EXPECT_EQ(j["totals"]["parameters"], f->parameter_count());
  EXPECT_EQ(j["totals"]["by_type"]["f16"]["tensors"], 44);
  EXPECT_EQ(j["totals"]["by_type"]["f32"]["tensors"], 13);
  EXPECT_DOUBLE_EQ(j["totals"]["by_type"]["f16"]["bits_per_weight"].get<double>(), 16.0);
  EXPECT_DOUBLE_EQ(j["totals"]["by_type"]["f32"]["bits_per_weight"].get<double>(), 32.0);
}

TEST_F(GgufCliTest, QuantizeThenInspect) {
  const std::string out = Path("wp-q4_0.gguf");
  testing::RunResult r = Run({"gguf", "quantize", kModel, out, "--type", "q4_0", "--threads", "2"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("quantize: 57/57 tensors in "), std::string::npos) << r.err;  // not a terminal: one line for the stage
  EXPECT_EQ(r.err.find("\r"), std::string::npos) << r.err;                                // and no bar
  EXPECT_NE(r.err.find("quantized"), std::string::npos) << r.err;  // summary
  testing::RunResult i = Run({"gguf", "inspect", "--json", out});
  ASSERT_EQ(i.exit_code, 0) << i.err;
  const auto j = nlohmann::json::parse(i.out);
  EXPECT_EQ(j["metadata"]["general.file_type"]["value"], 2);
  EXPECT_EQ(j["metadata"]["general.quantization_version"]["value"], 2);
  // q4_0 is llama.cpp's MOSTLY_Q4_0 mix: output.weight asks for q6_K, whose 256-block does not
  // divide its 384-long rows, so q8_0; the other 43 matrices q4_0.
  EXPECT_EQ(j["totals"]["by_type"]["q4_0"]["tensors"], 43);
  EXPECT_EQ(j["totals"]["by_type"]["q8_0"]["tensors"], 1);
  EXPECT_DOUBLE_EQ(j["totals"]["by_type"]["q4_0"]["bits_per_weight"].get<double>(), 4.5);
  EXPECT_EQ(j["metadata"]["general.name"]["value"], "War and Peace 11M");
}

TEST_F(GgufCliTest, QuantizeReportsKQuantFallbacks) {
  testing::RunResult r = Run({"gguf", "quantize", kModel, Path("q6.gguf"), "--type", "q6_k"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("fallback: row length 384 is not a multiple of 256"), std::string::npos);
  // 37 matrices fall back; output.weight goes to q8_0 by q6_k's own rule for the output.
  EXPECT_NE(r.err.find("37 tensor(s) fell back"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("1 chosen by the mix"), std::string::npos) << r.err;
}

// A preset with overrides, in llama.cpp's q4_k_m mix and with --pure.
TEST_F(GgufCliTest, MakeRandomMixAndPure) {
  const std::string shape = "llama-3.2-1b,dim=256,heads=8,kv_heads=2,ffn=512,vocab=300,layers=8";
  for (bool pure : {false, true}) {
    const std::string out = Path(pure ? "pure.gguf" : "mix.gguf");
    std::vector<std::string> args = {"gguf", "make-random", "--shape", shape, "--type", "Q4_K_M",
                                     out};
    if (pure) args.push_back("--pure");
    testing::RunResult r = Run(args);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.err.find(pure ? "q4_k_m (pure)" : "q4_k_m"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("llama-3.2-1b+dim=256"), std::string::npos) << r.err;
    testing::RunResult i = Run({"gguf", "inspect", "--json", out});
    ASSERT_EQ(i.exit_code, 0) << i.err;
    const auto j = nlohmann::json::parse(i.out);
    EXPECT_EQ(j["metadata"]["general.file_type"]["value"], 15);
    EXPECT_EQ(j["metadata"]["llama.block_count"]["value"], 8);
    const auto& by = j["totals"]["by_type"];
    if (pure) {
      EXPECT_EQ(by["q4_K"]["tensors"], 1 + 8 * 7);
      EXPECT_FALSE(by.contains("q6_K"));
    } else {
      // Tied: token_embd is the output (q6_K); attn_v and ffn_down of layers 0, 3, 6, 7.
      EXPECT_EQ(by["q6_K"]["tensors"], 1 + 2 * 4);
      EXPECT_EQ(by["q4_K"]["tensors"], 8 * 7 - 2 * 4);
    }
  }
}

TEST_F(GgufCliTest, MakeRandomThenInspect) {
  const std::string out = Path("rand.gguf");
  testing::RunResult r = Run({"gguf", "make-random", "--shape",
                     "dim=256,layers=2,heads=4,kv_heads=2,ffn=512,vocab=600,tied=1", "--type",
                     "q4_k", "--seed", "7", out});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  testing::RunResult i = Run({"gguf", "inspect", "--json", out});
  ASSERT_EQ(i.exit_code, 0) << i.err;
  const auto j = nlohmann::json::parse(i.out);
  EXPECT_EQ(j["metadata"]["llama.block_count"]["value"], 2);
  EXPECT_EQ(j["metadata"]["general.file_type"]["value"], 14);
  EXPECT_EQ(j["totals"]["tensors"], 2 + 2 * 9);  // tied: no output.weight
  EXPECT_EQ(j["totals"]["by_type"]["q4_K"]["tensors"], 1 + 2 * 7);

  testing::RunResult list = Run({"gguf", "make-random", "--list-shapes"});
  ASSERT_EQ(list.exit_code, 0) << list.err;
  for (const char* name : {"smollm-135m", "tinyllama-1.1b", "llama-3.2-1b"}) {
    EXPECT_NE(list.out.find(name), std::string::npos) << name;
  }
}

TEST_F(GgufCliTest, BadInputExitsTwoAndWritesNothing) {
  const std::string out = Path("out.gguf");
  const std::string garbage = Path("garbage.gguf");
  std::ofstream(garbage) << "this is not a gguf file";
  struct Case {
    std::vector<std::string> args;
    const char* says;
  };
  const Case cases[] = {
      {{"gguf", "inspect", Path("missing.gguf")}, "no such file"},
      {{"gguf", "inspect", garbage}, "not a GGUF file"},
      {{"gguf", "quantize", Path("missing.gguf"), out, "--type", "q8_0"}, "no such file"},
      {{"gguf", "quantize", kModel, out, "--type", "q5_x"}, "unknown --type 'q5_x'"},
      {{"gguf", "quantize", kModel, out, "--type", "q8_k"}, "q4_k_m"},  // lists the names
      {{"gguf", "quantize", garbage, out, "--type", "q8_0"}, "not a GGUF file"},
      {{"gguf", "make-random", "--shape", "gpt-17", "--type", "f16", out}, "unknown preset"},
      {{"gguf", "make-random", "--shape", "dim=64,layers=2", "--type", "f16", out},
       "missing heads"},
      {{"gguf", "make-random", "--shape", "smollm-135m", "--type", "int3", out},
       "unknown --type 'int3'"},
      {{"gguf", "make-random", "--type", "f16", out}, "--shape is required"},
      {{"gguf", "quantize", kModel}, "OUT"},  // CLI11 usage error
      {{"gguf", "quantize", kModel, Path("no/such/dir/x.gguf"), "--type", "q8_0"},
       "does not exist"},
      {{"gguf", "quantize", kModel, out, "--type", "q8_0", "--threads", "-3"}, "--threads -3"},
      {{"gguf", "inspect", dir_.string()}, "is not a regular file"},
      {{"gguf", "make-random", "--shape", "smollm-135m", Path("no/such/dir/x.gguf")},
       "does not exist"},
  };
  for (const Case& c : cases) {
    testing::RunResult r = Run(c.args);
    std::string cmd;
    for (const auto& a : c.args) cmd += a + " ";
    EXPECT_EQ(r.exit_code, 2) << cmd << "\n" << r.err;
    EXPECT_NE(r.err.find(c.says), std::string::npos) << cmd << "\n" << r.err;
    EXPECT_FALSE(fs::exists(out)) << cmd;
  }
  // Only the garbage file is in the directory: no temp files left behind either.
  size_t n = 0;
  for (const auto& e : fs::directory_iterator(dir_)) n += e.path() != garbage;
  EXPECT_EQ(n, 0u);
}

}  // namespace
}  // namespace tarmac
