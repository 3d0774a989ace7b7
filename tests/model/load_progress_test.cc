// LlamaModel::Load reports its progress: the bytes read (without mmap) up to the file's size,
// in order, and the weight-preparation stages each ending at their total.
#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "common/test_util.h"
#include "model/llama_model.h"

namespace tarmac::model {
namespace {

struct Call {
  std::string stage;
  int64_t done, total;
};

TEST(LoadProgressTest, ReadingReachesTheFileSizeInOrder) {
  std::vector<Call> calls;
  auto m = LlamaModel::Load(tarmac::testing::kWp11m, /*use_mmap=*/false, /*context=*/0,
                            [&](const std::string& s, int64_t done, int64_t total) { calls.push_back({s, done, total}); });
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  const int64_t size = static_cast<int64_t>(std::filesystem::file_size(tarmac::testing::kWp11m));
  std::map<std::string, Call> last;
  int64_t prev = 0;
  for (const Call& c : calls) {
    if (c.stage == "reading") {
      EXPECT_EQ(c.total, size);
      EXPECT_GT(c.done, prev);
      prev = c.done;
    }
    EXPECT_LE(c.done, c.total) << c.stage;
    last[c.stage] = c;
  }
  ASSERT_TRUE(last.count("reading"));
  EXPECT_EQ(last["reading"].done, size);
  for (const auto& [stage, c] : last) EXPECT_EQ(c.done, c.total) << stage << " ends at its total";
}

TEST(LoadProgressTest, MmapReadsNothingAndNoCallbackIsFine) {
  std::vector<Call> calls;
  auto m = LlamaModel::Load(tarmac::testing::kWp11m, /*use_mmap=*/true, /*context=*/0,
                            [&](const std::string& s, int64_t done, int64_t total) { calls.push_back({s, done, total}); });
  ASSERT_TRUE(m.ok());
  for (const Call& c : calls) EXPECT_NE(c.stage, "reading");
  EXPECT_TRUE(LlamaModel::Load(tarmac::testing::kWp11m, false).ok());
}

}  // namespace
}  // namespace tarmac::model
