#include "gguf/pad_model.h"

#include <algorithm>
#include <array>
#include <charconv>
#include <cstring>
#include <filesystem>
#include <map>
#include <string_view>
#include <vector>

#include "gguf/gguf_file.h"
#include "gguf/gguf_writer.h"
#include "tensor/quant_ref.h"

namespace tarmac::gguf {
namespace {

// Per-block tensors pad knows how to extend; the first nine are required.
constexpr std::array<std::string_view, 12> kBlockTensors = {
    "attn_norm.weight", "attn_q.weight",   "attn_k.weight", "attn_v.weight",
    "attn_output.weight", "ffn_norm.weight", "ffn_gate.weight", "ffn_up.weight",
    "ffn_down.weight", "attn_q.bias",    "attn_k.bias",   "attn_v.bias"};
constexpr size_t kNumRequired = 9;

// Sanity bound on the FFN width (keeps every dim and element count far from overflow).
constexpr int64_t kMaxFfn = int64_t{1} << 24;

// "blk.<i>.<suffix>" -> (i, suffix); false for other names or a malformed index.
bool SplitBlockName(std::string_view name, int64_t* index, std::string_view* suffix) {
  if (!name.starts_with("blk.")) return false;
  name.remove_prefix(4);
  const size_t dot = name.find('.');
  if (dot == std::string_view::npos || dot == 0) return false;
  const auto [p, ec] = std::from_chars(name.data(), name.data() + dot, *index);
  if (ec != std::errc() || p != name.data() + dot || *index < 0) return false;
  *suffix = name.substr(dot + 1);
  return true;
}

std::string BlockName(int64_t i, std::string_view suffix) {
  return fmt::format("blk.{}.{}", i, suffix);
}

// How one output tensor's bytes are made from one input tensor.
enum class Fill {
  kCopy,       // same shape, bytes copied
  kZero,       // all zeros (the writer hands out a zeroed buffer)
  kPadRows,    // [cols, rows_in] -> [cols, rows_out]: input rows, then zero rows
  kTileRows,   // [cols, rows_in] -> [cols, rows_out]: row r is input row r % rows_in
  kPadCols,    // [cols_in, rows] -> [cols_out, rows]: each input row followed by zeros
};

struct OutTensor {
  std::string name;
  std::vector<int64_t> dims;
  const TensorInfo* src = nullptr;
  Fill fill = Fill::kCopy;
};

Status FillTensor(const OutTensor& o, std::span<uint8_t> dst) {
  const TensorInfo& s = *o.src;
  switch (o.fill) {
    case Fill::kZero:
      return Status::Ok();
    case Fill::kCopy:
    case Fill::kPadRows:
      // Rows are contiguous: the input's bytes are the output's first rows.
      std::memcpy(dst.data(), s.data, s.nbytes);
      return Status::Ok();
    case Fill::kTileRows: {
      const uint64_t row_bytes = static_cast<uint64_t>(RowBytes(s.type, s.dims[0]));
      const int64_t rows_in = s.num_rows();
      for (int64_t r = 0; r < o.dims[1]; ++r) {
        std::memcpy(dst.data() + r * row_bytes, s.data + (r % rows_in) * row_bytes, row_bytes);
      }
      return Status::Ok();
    }
    case Fill::kPadCols: {
      const uint64_t in_row = static_cast<uint64_t>(RowBytes(s.type, s.dims[0]));
      const uint64_t out_row = static_cast<uint64_t>(RowBytes(s.type, o.dims[0]));
      for (int64_t r = 0; r < s.num_rows(); ++r) {
        std::memcpy(dst.data() + r * out_row, s.data + r * in_row, in_row);
      }
      return Status::Ok();
    }
  }
  return Internal("pad: unknown fill kind");
}

}  // namespace

Result<PadSummary> PadModel(const std::string& in, const std::string& out,
                            const PadOptions& options) {
  if (options.extra_layers < 0) {
    return InvalidArgument("extra layers (--layers) must be >= 0, got {}", options.extra_layers);
  }
  if (options.ffn < 0) return InvalidArgument("FFN width (--ffn) must be >= 0, got {}", options.ffn);
  std::error_code ec;
  if (std::filesystem::equivalent(in, out, ec)) {
    return InvalidArgument("output {} is the input file", out);
  }
  TARMAC_ASSIGN_OR_RETURN(File file, File::Open(in));
  auto fail = [&in](const Status& st) {
    return Status(st.code(), fmt::format("{}: {}", in, st.message()));
  };

  auto arch = file.GetString("general.architecture");
  if (!arch.ok()) return fail(arch.status());
  if (*arch != "llama") {
    return InvalidArgument("{}: general.architecture is '{}'; pad supports llama models only",
                           in, *arch);
  }
  auto n_layer_u = file.GetUint("llama.block_count");
  if (!n_layer_u.ok()) return fail(n_layer_u.status());
  auto n_ff_u = file.GetUint("llama.feed_forward_length");
  if (!n_ff_u.ok()) return fail(n_ff_u.status());
  auto n_embd_u = file.GetUint("llama.embedding_length");
  if (!n_embd_u.ok()) return fail(n_embd_u.status());
  if (*n_layer_u == 0 || *n_layer_u > static_cast<uint64_t>(kMaxPaddedLayers)) {
    return InvalidArgument("{}: llama.block_count {} is out of range [1, {}]", in,
                           *n_layer_u, kMaxPaddedLayers);
  }
  if (*n_ff_u == 0 || *n_ff_u > static_cast<uint64_t>(kMaxFfn) || *n_embd_u == 0 ||
      *n_embd_u > static_cast<uint64_t>(kMaxFfn)) {
    return InvalidArgument("{}: llama.feed_forward_length {} or embedding_length {} is out "
                           "of range", in, *n_ff_u, *n_embd_u);
  }
  const int64_t n_layer = static_cast<int64_t>(*n_layer_u);
  const int64_t n_ff = static_cast<int64_t>(*n_ff_u);
  const int64_t n_embd = static_cast<int64_t>(*n_embd_u);
  if (options.extra_layers > kMaxPaddedLayers - n_layer) {
    return InvalidArgument("{} + {} blocks is more than the limit of {}", n_layer,
                           options.extra_layers, kMaxPaddedLayers);
  }
  const int64_t ffn = options.ffn == 0 ? n_ff : options.ffn;
  if (ffn < n_ff) {
    return InvalidArgument("FFN width {} (--ffn) is smaller than the model's FFN width {} (the "
                           "FFN can only be widened)", ffn, n_ff);
  }
  if (ffn > kMaxFfn) return InvalidArgument("FFN width {} (--ffn) is above the limit of {}", ffn, kMaxFfn);

  // Per block: suffix -> tensor. Every blk.* tensor must be one pad knows.
  std::vector<std::map<std::string_view, const TensorInfo*>> blocks(n_layer);
  size_t last_block_tensor = 0;
  for (size_t i = 0; i < file.tensors().size(); ++i) {
    const TensorInfo& t = file.tensors()[i];
    int64_t b = 0;
    std::string_view suffix;
    if (!SplitBlockName(t.name, &b, &suffix)) {
      if (t.name.starts_with("blk.")) {
        return InvalidArgument("{}: tensor '{}' has no valid block index", in, t.name);
      }
      continue;
    }
    if (b >= n_layer) {
      return InvalidArgument("{}: tensor '{}' belongs to block {}, but llama.block_count is {}",
                             in, t.name, b, n_layer);
    }
    if (std::find(kBlockTensors.begin(), kBlockTensors.end(), suffix) == kBlockTensors.end()) {
      return InvalidArgument("{}: tensor '{}' is not one pad can extend (known per block: "
                             "attn_norm, attn_q/k/v (+bias), attn_output, ffn_norm, ffn_gate, "
                             "ffn_up, ffn_down)", in, t.name);
    }
    if (!IsComputeType(t.type)) {
      return Unimplemented("{}: tensor '{}' has type {}, which tarmac cannot compute with",
                           in, t.name, DTypeName(t.type));
    }
    blocks[b][suffix] = &t;
    last_block_tensor = i;
  }
  for (int64_t b = 0; b < n_layer; ++b) {
    for (size_t k = 0; k < kNumRequired; ++k) {
      if (blocks[b].count(kBlockTensors[k]) == 0) {
        return InvalidArgument("{}: tensor '{}' is missing", in,
                               BlockName(b, kBlockTensors[k]));
      }
    }
    for (std::string_view s : {"ffn_gate.weight", "ffn_up.weight"}) {
      const TensorInfo& t = *blocks[b][s];
      if (t.dims != std::vector<int64_t>{n_embd, n_ff}) {
        return InvalidArgument("{}: tensor '{}' must be [{}, {}]", in, t.name, n_embd, n_ff);
      }
    }
    const TensorInfo& down = *blocks[b]["ffn_down.weight"];
    if (down.dims != std::vector<int64_t>{n_ff, n_embd}) {
      return InvalidArgument("{}: tensor '{}' must be [{}, {}]", in, down.name, n_ff, n_embd);
    }
    const int64_t bs = Traits(down.type).block_size;
    if (ffn % bs != 0) {
      return InvalidArgument("FFN width {} (--ffn) is not a multiple of {}, the block size of '{}' ({})",
                             ffn, bs, down.name, DTypeName(down.type));
    }
  }

  // The output tensors: input order, appended blocks right after the last block tensor.
  std::vector<OutTensor> plan;
  auto add_block_tensor = [&](int64_t out_block, const TensorInfo& t, std::string_view suffix,
                              bool appended) {
    OutTensor o{BlockName(out_block, suffix), t.dims, &t, Fill::kCopy};
    if (suffix == "ffn_gate.weight" || suffix == "ffn_up.weight") {
      o.dims = {n_embd, ffn};
      o.fill = appended ? Fill::kTileRows : (ffn == n_ff ? Fill::kCopy : Fill::kPadRows);
    } else if (suffix == "ffn_down.weight") {
      o.dims = {ffn, n_embd};
      o.fill = appended ? Fill::kZero : (ffn == n_ff ? Fill::kCopy : Fill::kPadCols);
    } else if (suffix == "attn_output.weight") {
      o.fill = appended ? Fill::kZero : Fill::kCopy;
    }
    plan.push_back(std::move(o));
  };
  for (size_t i = 0; i < file.tensors().size(); ++i) {
    const TensorInfo& t = file.tensors()[i];
    int64_t b = 0;
    std::string_view suffix;
    if (SplitBlockName(t.name, &b, &suffix)) {
      add_block_tensor(b, t, suffix, false);
    } else {
      plan.push_back(OutTensor{t.name, t.dims, &t, Fill::kCopy});
    }
    if (i != last_block_tensor) continue;
    for (int64_t j = 0; j < options.extra_layers; ++j) {
      const int64_t src = j % n_layer;
      // The source block's tensors in their file order.
      std::vector<std::pair<const TensorInfo*, std::string_view>> ts;
      for (const auto& [s, tp] : blocks[src]) ts.emplace_back(tp, s);
      std::sort(ts.begin(), ts.end(), [](const auto& a, const auto& b) {
        return a.first->offset < b.first->offset;
      });
      for (const auto& [tp, s] : ts) add_block_tensor(n_layer + j, *tp, s, true);
    }
  }

  Writer writer;
  for (const KeyValue& kv : file.metadata()) writer.SetKV(kv.key, kv.value);
  writer.SetKV("llama.block_count", Value::U32(static_cast<uint32_t>(n_layer + options.extra_layers)));
  writer.SetKV("llama.feed_forward_length", Value::U32(static_cast<uint32_t>(ffn)));
  if (const Value* name = file.Find("general.name"); name != nullptr && name->AsString() != nullptr &&
                                                     (options.extra_layers > 0 || ffn != n_ff)) {
    writer.SetKV("general.name",
                 Value::Str(fmt::format("{} (padded: +{} zero-output blocks, ffn {})",
                                        *name->AsString(), options.extra_layers, ffn)));
  }

  PadSummary summary;
  summary.layers_in = n_layer;
  summary.layers_out = n_layer + options.extra_layers;
  summary.ffn_in = n_ff;
  summary.ffn_out = ffn;
  summary.parameters_in = file.parameter_count();
  summary.tensors_out = plan.size();
  const size_t count = plan.size();
  for (size_t i = 0; i < count; ++i) {
    const OutTensor* o = &plan[i];
    int64_t elements = 1;
    for (int64_t d : o->dims) elements *= d;
    summary.parameters_out += elements;
    summary.tensor_bytes_out +=
        static_cast<uint64_t>(RowBytes(o->src->type, o->dims[0]) * (elements / o->dims[0]));
    auto fill = [o, i, count, &options](std::span<uint8_t> dst) -> Status {
      TARMAC_RETURN_IF_ERROR(FillTensor(*o, dst));
      if (options.on_tensor) options.on_tensor(o->name, o->src->type, i, count);
      return Status::Ok();
    };
    Status st = writer.AddTensor(o->name, o->dims, o->src->type, fill);
    if (!st.ok()) return fail(st);
  }
  Status st = writer.Write(out);
  if (!st.ok()) return Status(st.code(), fmt::format("{} -> {}: {}", in, out, st.message()));
  return summary;
}

}  // namespace tarmac::gguf
