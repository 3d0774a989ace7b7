// Runs the real `tarmac gguf pad`: the padded model loads and generates the same greedy text as
// the original, and bad input exits with code 2, a message naming the problem, and no output file.
#include <filesystem>
#include <string>
#include <vector>

#include <unistd.h>

#include <gtest/gtest.h>

#include "common/test_util.h"
#include "gguf/gguf_file.h"
#include "gguf/gguf_writer.h"

namespace tarmac {
namespace {

namespace fs = std::filesystem;

class GgufPadTest : public testing::TempDirTest {
 protected:
  testing::RunResult Run(std::vector<std::string> args) {
    return testing::RunTarmac(std::move(args), dir_.string());
  }
  // Runs a command expected to fail with exit code 2 and `needle` in its one-line error.
  void ExpectUsageError(std::vector<std::string> args, const std::string& needle) {
    testing::RunResult r = Run(args);
    EXPECT_EQ(r.exit_code, 2) << r.err;
    EXPECT_NE(r.err.find("tarmac gguf pad: "), std::string::npos) << r.err;
    EXPECT_NE(r.err.find(needle), std::string::npos) << r.err;
  }
};

TEST_F(GgufPadTest, PaddedModelGeneratesTheSameGreedyText) {
  const std::string out = Path("wp-pad.gguf");
  testing::RunResult r =
      Run({"gguf", "pad", testing::kWp11m, out, "--layers", "2", "--ffn", "2048"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("(6 blocks, ffn 1024, 11015040 parameters)"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("(8 blocks, ffn 2048"), std::string::npos) << r.err;
  auto f = gguf::File::Open(out);
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  EXPECT_EQ(*f->GetUint("llama.block_count"), 8u);
  EXPECT_EQ(*f->GetUint("llama.feed_forward_length"), 2048u);
  // Embeddings and output (2·384·2048 + 384) plus 8 blocks of 2 norms (2·384), q and o
  // (2·384·384), k and v (2·384·128) and gate, up, down (3·384·2048).
  EXPECT_EQ(f->parameter_count(), 2 * 384 * 2048 + 384 +
                                      8 * (2 * 384 + 2 * 384 * 384 + 2 * 384 * 128 +
                                           3 * 384 * 2048));
  EXPECT_NE(r.err.find(std::to_string(f->parameter_count()) + " parameters"), std::string::npos);

  const std::vector<std::string> gen = {"-p", "Prince Andrew", "-n", "24", "--temp", "0",
                                        "--threads", "2"};
  std::vector<std::string> a = {"generate", "-m", testing::kWp11m};
  std::vector<std::string> b = {"generate", "-m", out};
  a.insert(a.end(), gen.begin(), gen.end());
  b.insert(b.end(), gen.begin(), gen.end());
  testing::RunResult ra = Run(a);
  testing::RunResult rb = Run(b);
  ASSERT_EQ(ra.exit_code, 0) << ra.err;
  ASSERT_EQ(rb.exit_code, 0) << rb.err;
  EXPECT_FALSE(ra.out.empty());
  EXPECT_EQ(ra.out, rb.out);
}

TEST_F(GgufPadTest, BadInputExitsWithCode2AndWritesNothing) {
  const std::string out = Path("out.gguf");
  ExpectUsageError({"gguf", "pad", testing::kWp11m, out, "--layers", "-3"},
                   "--layers must be >= 0, got -3");
  ExpectUsageError({"gguf", "pad", testing::kWp11m, out, "--layers", "2", "--ffn", "512"},
                   "FFN width 512 (--ffn) is smaller than the model's FFN width 1024");
  ExpectUsageError({"gguf", "pad", Path("absent.gguf"), out, "--layers", "2"},
                   "absent.gguf: no such file");
  ExpectUsageError({"gguf", "pad", testing::kWp11m, Path("no/dir/out.gguf"), "--layers", "2"},
                   "does not exist");
  ExpectUsageError({"gguf", "pad", testing::kWp11m, dir_.string(), "--layers", "2"},
                   "is a directory");
  ExpectUsageError({"gguf", "pad", testing::kWp11m, testing::kWp11m, "--layers", "2"},
                   "is the input file");
  // Not a GGUF file at all.
  {
    const std::string junk = Path("junk.gguf");
    FILE* fp = std::fopen(junk.c_str(), "wb");
    ASSERT_NE(fp, nullptr);
    std::fputs("this is not a gguf file", fp);
    std::fclose(fp);
    ExpectUsageError({"gguf", "pad", junk, out, "--layers", "2"}, "junk.gguf");
    fs::remove(junk);
  }
  // A valid GGUF file of another architecture.
  {
    gguf::Writer w;
    w.SetKV("general.architecture", gguf::Value::Str("gpt2"));
    const float zeros[4] = {};
    ASSERT_TRUE(w.AddTensor("token_embd.weight", {4}, DType::kF32,
                            {reinterpret_cast<const uint8_t*>(zeros), sizeof(zeros)})
                    .ok());
    const std::string gpt2 = Path("gpt2.gguf");
    ASSERT_TRUE(w.Write(gpt2).ok());
    ExpectUsageError({"gguf", "pad", gpt2, out, "--layers", "2"},
                     "general.architecture is 'gpt2'; pad supports llama models only");
    fs::remove(gpt2);
  }
  // A read-only output directory (meaningless as root, who may write anywhere).
  if (::geteuid() != 0) {
    const fs::path ro = dir_ / "ro";
    fs::create_directories(ro);
    fs::permissions(ro, fs::perms::owner_read | fs::perms::owner_exec);
    ExpectUsageError({"gguf", "pad", testing::kWp11m, (ro / "out.gguf").string(), "--layers", "2"},
                     "is not writable");
    fs::permissions(ro, fs::perms::owner_all);
    fs::remove_all(ro);
  }
  EXPECT_TRUE(fs::is_empty(dir_));
}

}  // namespace
}  // namespace tarmac
