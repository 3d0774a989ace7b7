#include "model/llama_model.h"

#include <cmath>
#include <fstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

namespace tarmac::model {
namespace {

const std::string kRepo = TARMAC_SOURCE_DIR;
const std::string kShared = TARMAC_SHARED_DIR;

// Tolerance for F16 weights, F32 accumulation and an F16 KV cache, against the float64
// reference: |ours - ref| <= abs_tol + kRelTol * |ref|, abs_tol per model (scaled to the
// size of its logits: the random-weight model's logits are ~0.2, the trained ones ~10).
constexpr double kRelTol = 0.002;

bool Exists(const std::string& p) { return std::ifstream(p).good(); }

// A sequence held in its own run of blocks of a shared cache.
struct Seq {
  std::vector<int32_t> tokens;
  std::vector<int32_t> blocks;
};

// Appends tokens [from, to) of seq s (positions = indices) to the batch.
void AddTokens(ForwardBatch* b, int32_t seq_index, const Seq& s, int32_t from, int32_t to,
               int32_t block_size, bool want_logits) {
  for (int32_t p = from; p < to; ++p) {
    if (want_logits) b->logits_for.push_back(b->n_tokens());
    b->tokens.push_back(s.tokens[p]);
    b->positions.push_back(p);
    b->seq.push_back(seq_index);
    b->slots.push_back(static_cast<int64_t>(s.blocks[p / block_size]) * block_size + p % block_size);
  }
}

class ModelGoldenTest : public ::testing::TestWithParam<std::string> {};

void CheckGolden(const std::string& model_path, const std::string& golden_path,
                 double abs_tol) {
  double max_err = 0;
  auto model = LlamaModel::Load(model_path);
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  LlamaModel& m = **model;
  const ModelConfig& c = m.config();
  std::ifstream in(golden_path);
  auto golden = nlohmann::json::parse(in);
  ThreadPool pool(2);
  KvShape shape{c.n_layer, c.n_head_kv, c.head_dim, 16, 64};
  int checked_positions = 0, checked_greedy = 0;
  for (const auto& cs : golden["cases"]) {
    KvCache cache(shape);
    Seq s;
    s.tokens = cs["tokens"].get<std::vector<int32_t>>();
    for (int32_t b = 0; b < shape.num_blocks; ++b) s.blocks.push_back(b);
    ForwardBatch batch;
    batch.block_tables = {s.blocks};
    const int32_t n_prompt = static_cast<int32_t>(s.tokens.size());
    AddTokens(&batch, 0, s, 0, n_prompt, shape.block_size, true);
    std::vector<float> logits;
    m.Forward(batch, &cache, &pool, &logits);
    const auto& top = cs["top_logits"];
    ASSERT_EQ(top.size(), static_cast<size_t>(n_prompt));
    for (int32_t p = 0; p < n_prompt; ++p) {
      for (const auto& pair : top[p]) {
        const int32_t id = pair[0];
        const double want = pair[1];
        const double got = logits[static_cast<size_t>(p) * c.n_vocab + id];
        ASSERT_NEAR(got, want, abs_tol + kRelTol * std::fabs(want))
            << "position " << p << " token " << id;
        max_err = std::max(max_err, std::fabs(got - want));
      }
      ++checked_positions;
    }
    // Greedy continuation, one decode step at a time, until the reference's margin between
    // the top two logits falls inside the tolerance (past a near-tie two correct
    // implementations may diverge).
    const auto greedy = cs["greedy"].get<std::vector<int32_t>>();
    const auto margin = cs["greedy_margin"].get<std::vector<double>>();
    std::vector<float> last(logits.end() - c.n_vocab, logits.end());
    for (size_t step = 0; step < greedy.size(); ++step) {
      if (margin[step] < 2 * abs_tol) break;
      const int32_t next = static_cast<int32_t>(
          std::max_element(last.begin(), last.end()) - last.begin());
      ASSERT_EQ(next, greedy[step]) << "greedy step " << step;
      ++checked_greedy;
      s.tokens.push_back(next);
      const int32_t pos = static_cast<int32_t>(s.tokens.size()) - 1;
      if (pos >= shape.num_blocks * shape.block_size) break;
      batch.Clear();
      batch.block_tables = {s.blocks};
      AddTokens(&batch, 0, s, pos, pos + 1, shape.block_size, true);
      m.Forward(batch, &cache, &pool, &last);
    }
  }
  EXPECT_GT(checked_positions, 0);
  EXPECT_GT(checked_greedy, 0);
  std::printf("checked %d prompt positions (max |error| %.2e), %d greedy steps\n",
              checked_positions, max_err, checked_greedy);
}

TEST(LlamaModelTest, Wp11mMatchesGolden) {
  CheckGolden(kRepo + "/models/wp-11m-f16.gguf", kRepo + "/tests/data/wp-11m-f16.golden.json", 0.005);
}

TEST(LlamaModelTest, Wp1mMatchesGolden) {
  CheckGolden(kRepo + "/models/wp-1m-f16.gguf", kRepo + "/tests/data/wp-1m-f16.golden.json", 0.005);
}

TEST(LlamaModelTest, Llama2TinyRandomMatchesGolden) {
  const std::string model = kShared + "/models/llama-2-tiny-random.gguf";
  if (!Exists(model)) GTEST_SKIP() << model << " absent";
  CheckGolden(model, kShared + "/models/llama-2-tiny-random.golden.json", 3e-5);
}

// Several sequences in one batch, one of them prefilled in chunks, give the same logits as
// each sequence alone in one pass.
TEST(LlamaModelTest, BatchedAndChunkedMatchSingle) {
  auto model = LlamaModel::Load(kRepo + "/models/wp-11m-f16.gguf");
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  LlamaModel& m = **model;
  const ModelConfig& c = m.config();
  KvShape shape{c.n_layer, c.n_head_kv, c.head_dim, 16, 32};
  ThreadPool pool(2);
  std::vector<Seq> seqs(3);
  seqs[0].tokens = {1067, 565, 44, 396, 331, 10, 652, 274, 258, 430, 279, 306, 290, 260, 742,
                    1302, 44, 276, 314, 283};
  seqs[1].tokens = {359, 1075, 44};
  seqs[2].tokens = {974, 316, 294, 1279, 117, 303, 44, 1740, 48, 53, 44, 276, 260, 1305};
  // Interleaved, non-contiguous block ids so paging is really exercised.
  seqs[0].blocks = {5, 1};
  seqs[1].blocks = {7};
  seqs[2].blocks = {2, 9};

  std::vector<std::vector<float>> alone(3);
  for (int i = 0; i < 3; ++i) {
    KvCache cache(shape);
    ForwardBatch b;
    b.block_tables = {seqs[i].blocks};
    AddTokens(&b, 0, seqs[i], 0, static_cast<int32_t>(seqs[i].tokens.size()), 16, true);
    m.Forward(b, &cache, &pool, &alone[i]);
  }
  KvCache cache(shape);
  // Step 1: seq 0 first chunk (0..7), seq 1 whole, seq 2 first chunk (0..4).
  // Step 2: seq 0 rest, seq 2 rest.
  std::vector<float> l1, l2;
  ForwardBatch b;
  b.block_tables = {seqs[0].blocks, seqs[1].blocks, seqs[2].blocks};
  AddTokens(&b, 0, seqs[0], 0, 7, 16, true);
  AddTokens(&b, 1, seqs[1], 0, 3, 16, true);
  AddTokens(&b, 2, seqs[2], 0, 4, 16, true);
  m.Forward(b, &cache, &pool, &l1);
  ForwardBatch b2;
  b2.block_tables = b.block_tables;
  AddTokens(&b2, 0, seqs[0], 7, 20, 16, true);
  AddTokens(&b2, 2, seqs[2], 4, 14, 16, true);
  m.Forward(b2, &cache, &pool, &l2);

  auto expect_rows = [&](const std::vector<float>& got, int32_t got_row,
                         const std::vector<float>& want, int32_t want_row) {
    for (int32_t v = 0; v < c.n_vocab; ++v) {
      const float w = want[static_cast<size_t>(want_row) * c.n_vocab + v];
      ASSERT_NEAR(got[static_cast<size_t>(got_row) * c.n_vocab + v], w, 1e-3 + 1e-4 * std::fabs(w))
          << "row " << got_row << " vocab " << v;
    }
  };
  for (int p = 0; p < 7; ++p) expect_rows(l1, p, alone[0], p);
  for (int p = 0; p < 3; ++p) expect_rows(l1, 7 + p, alone[1], p);
  for (int p = 0; p < 4; ++p) expect_rows(l1, 10 + p, alone[2], p);
  for (int p = 7; p < 20; ++p) expect_rows(l2, p - 7, alone[0], p);
  for (int p = 4; p < 14; ++p) expect_rows(l2, 13 + p - 4, alone[2], p);
}

// Weights copied into huge-page memory compute exactly what the mapped file does.
TEST(LlamaModelTest, CopiedWeightsEqualMapped) {
  auto mapped = LlamaModel::Load(kRepo + "/models/wp-1m-f16.gguf", /*use_mmap=*/true);
  auto copied = LlamaModel::Load(kRepo + "/models/wp-1m-f16.gguf", /*use_mmap=*/false);
  ASSERT_TRUE(mapped.ok() && copied.ok());
  const ModelConfig& c = (*mapped)->config();
  std::vector<float> a, b;
  for (auto* m : {mapped->get(), copied->get()}) {
    KvCache cache(KvShape{c.n_layer, c.n_head_kv, c.head_dim, 16, 4});
    Seq s;
    s.tokens = {1067, 565, 44, 396, 331};
    s.blocks = {0};
    ForwardBatch batch;
    batch.block_tables = {s.blocks};
    AddTokens(&batch, 0, s, 0, 5, 16, true);
    m->Forward(batch, &cache, nullptr, m == mapped->get() ? &a : &b);
  }
  EXPECT_EQ(a, b);
}

// The warm-up's throwaway passes leave nothing behind: a prefill and a decode step give
// bit-identical logits on a warmed and a fresh model, with f16 and int8 KV, on 2 threads.
TEST(LlamaModelTest, WarmupLeavesResultsUnchanged) {
  for (KvDtype dtype : {KvDtype::kF16, KvDtype::kInt8}) {
    auto fresh = LlamaModel::Load(kRepo + "/models/wp-11m-f16.gguf");
    auto warmed = LlamaModel::Load(kRepo + "/models/wp-11m-f16.gguf");
    ASSERT_TRUE(fresh.ok() && warmed.ok());
    ThreadPool pool(2);
    (*warmed)->Warmup(&pool, dtype);
    const ModelConfig& c = (*fresh)->config();
    std::vector<float> logits[2];
    for (int i = 0; i < 2; ++i) {
      LlamaModel* m = i == 0 ? fresh->get() : warmed->get();
      KvCache cache(KvShape{c.n_layer, c.n_head_kv, c.head_dim, 16, 4, dtype});
      Seq s;
      for (int32_t t = 0; t < 41; ++t) s.tokens.push_back((t * 131 + 7) % c.n_vocab);
      s.blocks = {3, 0, 2};
      std::vector<float> out;
      for (auto [from, to] : {std::pair{0, 40}, std::pair{40, 41}}) {  // prefill, then decode
        ForwardBatch batch;
        batch.block_tables = {s.blocks};
        AddTokens(&batch, 0, s, from, to, 16, true);
        m->Forward(batch, &cache, &pool, &out);
        logits[i].insert(logits[i].end(), out.begin(), out.end());
      }
    }
    EXPECT_EQ(logits[0], logits[1]) << (dtype == KvDtype::kInt8 ? "int8" : "f16");
  }
}

TEST(LlamaModelTest, RejectsNonModelFiles) {
  auto r = LlamaModel::Load(kRepo + "/tests/data/wp-11m-f16.golden.json");
  EXPECT_FALSE(r.ok());
  r = LlamaModel::Load("/nonexistent.gguf");
  EXPECT_FALSE(r.ok());
  r = LlamaModel::Load("/nonexistent.gguf", /*use_mmap=*/false);
  EXPECT_FALSE(r.ok());
}

}  // namespace
}  // namespace tarmac::model
