#include "gguf/quantize_file.h"

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <mutex>

#include "gguf/gguf_file.h"
#include "gguf/gguf_writer.h"
#include "tensor/quant_blocks.h"
#include "tensor/quant_ref.h"

namespace tarmac::gguf {

std::optional<uint32_t> LlamaFileType(DType type) {
  switch (type) {
    case DType::kF32: return 0;
    case DType::kF16: return 1;
    case DType::kQ4_0: return 2;
    case DType::kQ4_1: return 3;
    case DType::kQ8_0: return 7;
    case DType::kQ5_0: return 8;
    case DType::kQ5_1: return 9;
    case DType::kQ2_K: return 10;
    case DType::kQ3_K: return 11;  // MOSTLY_Q3_K_S: plain q3_K everywhere
    case DType::kQ4_K: return 14;  // MOSTLY_Q4_K_S
    case DType::kQ5_K: return 16;  // MOSTLY_Q5_K_S
    case DType::kQ6_K: return 18;
    case DType::kIQ2_XXS: return 19;
    case DType::kIQ2_XS: return 20;
    case DType::kIQ3_XXS: return 23;
    case DType::kIQ1_S: return 24;
    case DType::kIQ4_NL: return 25;
    case DType::kIQ3_S: return 26;
    case DType::kIQ2_S: return 28;
    case DType::kIQ4_XS: return 30;
    case DType::kIQ1_M: return 31;
    case DType::kBF16: return 32;
    case DType::kTQ1_0: return 36;
    case DType::kTQ2_0: return 37;
    case DType::kMXFP4: return 38;  // MOSTLY_MXFP4_MOE
    default: return std::nullopt;
  }
}

bool IsWeightTargetType(DType type) { return LlamaFileType(type).has_value(); }

namespace {

// llama.cpp's fallback for a row length the type's 256-element block does not divide.
DType BlockFallback(DType t) {
  switch (t) {
    case DType::kQ4_K: return DType::kQ5_0;
    case DType::kQ5_K: return DType::kQ5_1;
    case DType::kQ6_K: return DType::kQ8_0;
    case DType::kQ2_K: case DType::kQ3_K: case DType::kTQ1_0: case DType::kTQ2_0:
    case DType::kIQ2_XXS: case DType::kIQ2_XS: case DType::kIQ2_S: case DType::kIQ3_XXS:
    case DType::kIQ3_S: case DType::kIQ1_S: case DType::kIQ1_M: case DType::kIQ4_XS:
      return DType::kIQ4_NL;
    default: return DType::kF16;
  }
}

}  // namespace

DType PlanTensorType(DType target, int num_dims, int64_t row_len, std::string* note) {
  if (note != nullptr) note->clear();
  if (num_dims <= 1) return DType::kF32;  // norms: tiny, and precision-critical
  const int64_t bs = Traits(target).block_size;
  if (row_len % bs == 0) return target;
  DType fallback = BlockFallback(target);
  if (row_len % Traits(fallback).block_size != 0) fallback = DType::kF16;
  if (note != nullptr) {
    *note = fmt::format("row length {} is not a multiple of {} ({} block size): using {}", row_len,
                        bs, DTypeName(target), DTypeName(fallback));
  }
  return fallback;
}

Status ConvertRows(DType type, int64_t rows, int64_t row_len, const RowProducer& produce,
                   uint8_t* out, ThreadPool* pool) {
  const int64_t row_bytes = RowBytes(type, row_len);
  std::mutex mu;
  Status first_error;
  std::atomic<bool> failed{false};
  const int threads = pool != nullptr ? pool->num_threads() : 1;
  std::vector<std::vector<float>> scratch(threads, std::vector<float>(row_len));
  auto work = [&](int64_t begin, int64_t end, int t) {
    float* buf = scratch[t].data();
    for (int64_t r = begin; r < end && !failed.load(std::memory_order_relaxed); ++r) {
      Status st = produce(r, buf);
      if (st.ok()) st = QuantizeRowRef(type, buf, out + r * row_bytes, row_len);
      if (!st.ok()) {
        std::lock_guard<std::mutex> lock(mu);
        if (!failed.exchange(true)) {
          first_error = Status(st.code(), fmt::format("row {}: {}", r, st.message()));
        }
        return;
      }
    }
  };
  // ~64K elements per chunk: small enough to balance, large enough to amortise scheduling.
  const int64_t grain = std::max<int64_t>(1, (int64_t{1} << 16) / std::max<int64_t>(row_len, 1));
  if (pool != nullptr) {
    pool->ParallelFor(rows, grain, work);
  } else {
    work(0, rows, 0);
  }
  return first_error;
}

Result<QuantizeSummary> QuantizeFile(const std::string& in, const std::string& out,
                                     const QuantTarget& target, const QuantizeOptions& options,
                                     ThreadPool* pool) {
  if (!IsWeightTargetType(target.base)) {
    return InvalidArgument("quantize: cannot write weights as {} (use one of {})",
                           DTypeName(target.base), QuantTargetNames());
  }
  std::error_code ec;
  if (std::filesystem::equivalent(in, out, ec)) {
    return InvalidArgument("quantize: output {} is the input file", out);
  }
  TARMAC_ASSIGN_OR_RETURN(File file, File::Open(in));

  Writer writer;
  for (const KeyValue& kv : file.metadata()) writer.SetKV(kv.key, kv.value);
  writer.SetKV("general.file_type", Value::U32(target.file_type));
  if (Traits(target.base).block_size > 1) {
    writer.SetKV("general.quantization_version", Value::U32(2));
  } else {
    writer.RemoveKV("general.quantization_version");
  }

  const size_t count = file.tensors().size();
  for (const TensorInfo& t : file.tensors()) {
    if (!IsComputeType(t.type)) {
      return Unimplemented("quantize: {}: tensor '{}' has type {}, which tarmac cannot dequantize",
                           in, t.name, DTypeName(t.type));
    }
  }
  // Every tensor's type first, in the order llama.cpp's rules count tensors in; then the
  // tensors are written in file order.
  ModelFacts facts;  // only the mix rules read them
  if (target.uses_rules()) {
    TARMAC_ASSIGN_OR_RETURN(facts, ReadModelFacts(file));
  }
  std::vector<TensorDesc> descs;
  descs.reserve(count);
  for (const TensorInfo& t : file.tensors()) descs.push_back({t.name, t.dims, t.type});
  TARMAC_ASSIGN_OR_RETURN(const std::vector<TensorPlan> plans,
                          PlanTensorTypes(target, facts, descs));

  QuantizeSummary summary;
  summary.tensors.reserve(count);
  for (size_t i = 0; i < count; ++i) {
    const TensorInfo& t = file.tensors()[i];
    TensorReport rep;
    rep.name = t.name;
    rep.dims = t.dims;
    rep.from = t.type;
    rep.to = plans[i].type;
    rep.note = plans[i].Note();
    rep.fallback = !plans[i].fallback.empty();
    rep.mixed = !plans[i].rule.empty();
    summary.fallbacks += rep.fallback ? 1 : 0;
    summary.mixed += rep.mixed ? 1 : 0;
    rep.bytes_in = t.nbytes;
    rep.bytes_out = static_cast<uint64_t>(RowBytes(rep.to, t.dims[0]) * t.num_rows());
    summary.bytes_in += rep.bytes_in;
    summary.bytes_out += rep.bytes_out;
    summary.tensors.push_back(rep);

    const TensorInfo* tp = &t;
    const DType to = rep.to;
    auto fill = [tp, to, pool, i, count, rep, &options](std::span<uint8_t> dst) -> Status {
      const int64_t row_len = tp->dims[0];
      const int64_t in_row_bytes = RowBytes(tp->type, row_len);
      Status st;
      if (to == tp->type) {
        std::copy(tp->data, tp->data + tp->nbytes, dst.data());  // nothing to convert
      } else {
        st = ConvertRows(
            to, tp->num_rows(), row_len,
            [tp, in_row_bytes, row_len](int64_t r, float* buf) {
              DequantizeRowRef(tp->type, tp->data + r * in_row_bytes, buf, row_len);
              return Status::Ok();
            },
            dst.data(), pool);
      }
      if (st.ok() && options.on_tensor) options.on_tensor(rep, i, count);
      return st;
    };
    TARMAC_RETURN_IF_ERROR(writer.AddTensor(t.name, t.dims, rep.to, fill));
  }
  Status st = writer.Write(out);
  if (!st.ok()) return Status(st.code(), fmt::format("quantize {} -> {}: {}", in, out, st.message()));
  return summary;
}

}  // namespace tarmac::gguf
