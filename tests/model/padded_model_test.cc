// A model padded by gguf::PadModel (zero-output blocks appended, FFN widened with zeros)
// computes exactly the original's function: the logits of prefill and decode are bit-identical.
// Exactness holds because every added term is an exact zero (0·x = ±0, x + ±0 = x, silu(0)·0 =
// 0, and zero-padded dot products add zeros to the same partial sums), for f16 weights with f32
// accumulation and for q8_0 weights with q8_0-quantized activations (a zero activation block
// quantizes to scale 0).
#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "common/test_util.h"
#include "gguf/gguf_file.h"
#include "gguf/pad_model.h"
#include "gguf/quantize_file.h"
#include "model/llama_model.h"
#include "model/sequence_runner.h"

namespace tarmac::model {
namespace {

const std::string kWp11m = TARMAC_SOURCE_DIR "/models/wp-11m-f16.gguf";

struct Run {
  std::vector<float> prompt_logits;               // [n_prompt][n_vocab]
  std::vector<std::vector<float>> decode_logits;  // per greedy step, [n_vocab]
  std::vector<int32_t> greedy;
};

// Prefill `prompt` in chunks of 16 (so chunked prefill is covered), then `steps` greedy decodes.
Run RunModel(const std::string& path, const std::vector<int32_t>& prompt, int steps,
             int threads) {
  Run r;
  auto model = LlamaModel::Load(path);
  EXPECT_TRUE(model.ok()) << model.status().ToString();
  if (!model.ok()) return r;
  ThreadPool pool(threads);
  SequenceRunner runner(model->get(), 256, &pool, /*max_chunk=*/16);
  Status st = runner.Append(prompt, /*all_logits=*/true, &r.prompt_logits);
  EXPECT_TRUE(st.ok()) << st.ToString();
  const int32_t n_vocab = (*model)->config().n_vocab;
  std::vector<float> last(r.prompt_logits.end() - n_vocab, r.prompt_logits.end());
  for (int s = 0; s < steps; ++s) {
    const int32_t next =
        static_cast<int32_t>(std::max_element(last.begin(), last.end()) - last.begin());
    r.greedy.push_back(next);
    const int32_t tok[1] = {next};
    st = runner.Append(tok, /*all_logits=*/false, &last);
    EXPECT_TRUE(st.ok()) << st.ToString();
    r.decode_logits.push_back(last);
  }
  return r;
}

std::vector<int32_t> Prompt() {
  std::vector<int32_t> p;
  uint32_t x = 12345;
  for (int i = 0; i < 40; ++i) {
    x = x * 1103515245u + 12345u;
    p.push_back(static_cast<int32_t>((x >> 8) % 2048));
  }
  return p;
}

bool BitEqual(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

void ExpectSameLogits(const std::string& base, const std::string& padded, int threads) {
  const std::vector<int32_t> prompt = Prompt();
  const Run a = RunModel(base, prompt, 8, threads);
  const Run b = RunModel(padded, prompt, 8, threads);
  ASSERT_FALSE(a.prompt_logits.empty());
  ASSERT_EQ(a.prompt_logits.size(), b.prompt_logits.size());
  EXPECT_TRUE(BitEqual(a.prompt_logits, b.prompt_logits)) << "prompt logits differ";
  for (size_t i = 0; i < a.prompt_logits.size(); ++i) {
    if (a.prompt_logits[i] != b.prompt_logits[i]) {
      ADD_FAILURE() << "first difference at flat index " << i << ": " << a.prompt_logits[i]
                    << " vs " << b.prompt_logits[i];
      break;
    }
  }
  EXPECT_EQ(a.greedy, b.greedy);
  ASSERT_EQ(a.decode_logits.size(), b.decode_logits.size());
  for (size_t s = 0; s < a.decode_logits.size(); ++s) {
    EXPECT_TRUE(BitEqual(a.decode_logits[s], b.decode_logits[s])) << "decode step " << s;
  }
}

class PaddedModelTest : public testing::TempDirTest {};

TEST_F(PaddedModelTest, F16PaddedLogitsAreBitIdentical) {
  const std::string padded = Path("wp-11m-pad3.gguf");
  gguf::PadOptions opts;
  opts.extra_layers = 3;
  opts.ffn = 2048;
  auto sum = gguf::PadModel(kWp11m, padded, opts);
  ASSERT_TRUE(sum.ok()) << sum.status().ToString();
  EXPECT_EQ(sum->layers_out, 9);
  {
    auto m = LlamaModel::Load(padded);
    ASSERT_TRUE(m.ok()) << m.status().ToString();
    EXPECT_EQ((*m)->config().n_layer, 9);
    EXPECT_EQ((*m)->config().n_ff, 2048);
  }
  ExpectSameLogits(kWp11m, padded, 2);
  ExpectSameLogits(kWp11m, padded, 1);
}

TEST_F(PaddedModelTest, OnlyAppendedBlocksOrOnlyWiderFfnAreBitIdentical) {
  const std::string blocks_only = Path("blocks-only.gguf");
  gguf::PadOptions opts;
  opts.extra_layers = 2;
  ASSERT_TRUE(gguf::PadModel(kWp11m, blocks_only, opts).ok());
  ExpectSameLogits(kWp11m, blocks_only, 2);
  const std::string ffn_only = Path("ffn-only.gguf");
  opts.extra_layers = 0;
  opts.ffn = 1536;  // not a power of two: uneven kernel tails
  ASSERT_TRUE(gguf::PadModel(kWp11m, ffn_only, opts).ok());
  ExpectSameLogits(kWp11m, ffn_only, 2);
}

TEST_F(PaddedModelTest, Q8_0PaddedLogitsAreBitIdentical) {
  ThreadPool pool(2);
  const std::string q8 = Path("wp-11m-q8_0.gguf");
  ASSERT_TRUE(gguf::QuantizeFile(kWp11m, q8, DType::kQ8_0, {}, &pool).ok());
  const std::string padded = Path("wp-11m-q8_0-pad.gguf");
  gguf::PadOptions opts;
  opts.extra_layers = 2;
  opts.ffn = 2048;
  ASSERT_TRUE(gguf::PadModel(q8, padded, opts).ok());
  auto f = gguf::File::Open(padded);
  ASSERT_TRUE(f.ok());
  EXPECT_EQ(f->FindTensor("blk.7.ffn_down.weight")->type, DType::kQ8_0);
  ExpectSameLogits(q8, padded, 2);
}

}  // namespace
}  // namespace tarmac::model
