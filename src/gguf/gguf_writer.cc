#include "gguf/gguf_writer.h"

#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>

#include <fmt/format.h>

#include "gguf/gguf_file.h"
#include "base/utf8.h"
#include "gguf/gguf_internal.h"

namespace tarmac::gguf {

using internal::AppendLE;

namespace {

constexpr std::string_view kAlignmentKey = "general.alignment";

uint64_t AlignUp(uint64_t x, uint64_t a) { return (x + a - 1) / a * a; }

void AppendString(std::string& out, std::string_view s) {
  AppendLE<uint64_t>(out, s.size());
  out.append(s);
}

// Rejects values our own reader would reject, so a file we write always reads back.
Status CheckValue(const std::string& key, const Value& v, int depth) {
  if (!v.is_array()) return Status::Ok();
  if (depth >= kMaxArrayDepth)
    return InvalidArgument("gguf writer: key '{}': arrays nested more than {} deep", key,
                           kMaxArrayDepth);
  for (const Value& e : *v.AsArray()) TARMAC_RETURN_IF_ERROR(CheckValue(key, e, depth + 1));
  return Status::Ok();
}

void AppendValue(std::string& out, const Value& v) {
  switch (v.type()) {
    case ValueType::kString: AppendString(out, *v.AsString()); return;
    case ValueType::kArray: {
      AppendLE<uint32_t>(out, static_cast<uint32_t>(*v.array_type()));
      AppendLE<uint64_t>(out, v.AsArray()->size());
      for (const Value& e : *v.AsArray()) AppendValue(out, e);
      return;
    }
    default: {
      uint64_t bits = v.bits();
      char buf[8];
      std::memcpy(buf, &bits, 8);  // little-endian host: the low bytes come first
      out.append(buf, ScalarSize(v.type()));
    }
  }
}

}  // namespace

void Writer::SetKV(std::string key, Value value) {
  for (auto& kv : metadata_) {
    if (kv.key == key) {
      kv.value = std::move(value);
      return;
    }
  }
  metadata_.push_back(KeyValue{std::move(key), std::move(value)});
}

bool Writer::RemoveKV(std::string_view key) {
  for (auto it = metadata_.begin(); it != metadata_.end(); ++it) {
    if (it->key == key) {
      metadata_.erase(it);
      return true;
    }
  }
  return false;
}

Status Writer::SetAlignment(uint32_t n) {
  if (!internal::IsPowerOfTwo(n))
    return InvalidArgument("gguf writer: alignment {} is not a nonzero power of two", n);
  SetKV(std::string(kAlignmentKey), Value::U32(n));
  return Status::Ok();
}

Status Writer::CheckTensor(const std::string& name, const std::vector<int64_t>& dims,
                           DType type, uint64_t* nbytes) const {
  if (name.empty()) return InvalidArgument("gguf writer: empty tensor name");
  if (name.size() > kMaxTensorNameBytes)
    return InvalidArgument("gguf writer: tensor '{}': name is {} bytes, at most {} allowed",
                           internal::Printable(name), name.size(), kMaxTensorNameBytes);
  if (!IsValidUtf8(name))
    return InvalidArgument("gguf writer: tensor '{}': name is not valid UTF-8",
                           internal::Printable(name));
  if (tensor_names_.count(name))
    return InvalidArgument("gguf writer: duplicate tensor '{}'", name);
  if (dims.empty() || dims.size() > static_cast<size_t>(kMaxDims))
    return InvalidArgument("gguf writer: tensor '{}': {} dims, must be 1..{}", name,
                           dims.size(), kMaxDims);
  auto traits = GetDTypeTraits(static_cast<uint32_t>(type));
  if (!traits)
    return InvalidArgument("gguf writer: tensor '{}': unknown type {}", name,
                           static_cast<uint32_t>(type));
  int64_t ne = 1;
  for (int64_t d : dims) {
    if (d < 1) return InvalidArgument("gguf writer: tensor '{}': dim {} must be >= 1", name, d);
    if (__builtin_mul_overflow(ne, d, &ne))
      return InvalidArgument("gguf writer: tensor '{}': element count overflows int64", name);
  }
  if (dims[0] % traits->block_size != 0)
    return InvalidArgument("gguf writer: tensor '{}': row length {} is not a multiple of the {} "
                           "block size {}", name, dims[0], traits->name, traits->block_size);
  if (__builtin_mul_overflow(static_cast<uint64_t>(ne / traits->block_size),
                             static_cast<uint64_t>(traits->type_size), nbytes))
    return InvalidArgument("gguf writer: tensor '{}': byte size overflows", name);
  return Status::Ok();
}

Status Writer::AddTensor(std::string name, std::vector<int64_t> dims, DType type,
                         std::span<const uint8_t> data) {
  uint64_t nbytes = 0;
  TARMAC_RETURN_IF_ERROR(CheckTensor(name, dims, type, &nbytes));
  if (data.size() != nbytes)
    return InvalidArgument("gguf writer: tensor '{}': {} data bytes given, {} {} elements need {}",
                           name, data.size(), DTypeName(type), fmt::join(dims, "x"), nbytes);
  tensor_names_.insert(name);
  tensors_.push_back(PendingTensor{std::move(name), std::move(dims), type, nbytes, data, {}});
  return Status::Ok();
}

Status Writer::AddTensor(std::string name, std::vector<int64_t> dims, DType type, FillFn fill) {
  uint64_t nbytes = 0;
  TARMAC_RETURN_IF_ERROR(CheckTensor(name, dims, type, &nbytes));
  if (!fill) return InvalidArgument("gguf writer: tensor '{}': empty fill function", name);
  tensor_names_.insert(name);
  tensors_.push_back(
      PendingTensor{std::move(name), std::move(dims), type, nbytes, {}, std::move(fill)});
  return Status::Ok();
}

Result<std::string> Writer::BuildHeader(uint64_t* alignment) const {
  *alignment = kDefaultAlignment;
  for (const auto& kv : metadata_) {
    if (kv.key.empty()) return InvalidArgument("gguf writer: empty metadata key");
    if (!IsValidUtf8(kv.key))
      return InvalidArgument("gguf writer: metadata key '{}' is not valid UTF-8",
                             internal::Printable(kv.key));
    TARMAC_RETURN_IF_ERROR(CheckValue(kv.key, kv.value, 0));
    if (kv.key == kAlignmentKey) {
      if (kv.value.type() != ValueType::kUint32 || !internal::IsPowerOfTwo(kv.value.bits()))
        return InvalidArgument("gguf writer: general.alignment must be a uint32 power of two, "
                               "is {} {}", ValueTypeName(kv.value.type()), kv.value.ToString());
      *alignment = kv.value.bits();
    }
  }
  std::string out;
  out.append(reinterpret_cast<const char*>(internal::kMagic), 4);
  AppendLE<uint32_t>(out, internal::kWriteVersion);
  AppendLE<uint64_t>(out, tensors_.size());
  AppendLE<uint64_t>(out, metadata_.size());
  for (const auto& kv : metadata_) {
    AppendString(out, kv.key);
    AppendLE<uint32_t>(out, static_cast<uint32_t>(kv.value.type()));
    AppendValue(out, kv.value);
  }
  uint64_t offset = 0;
  for (const auto& t : tensors_) {
    AppendString(out, t.name);
    AppendLE<uint32_t>(out, static_cast<uint32_t>(t.dims.size()));
    for (int64_t d : t.dims) AppendLE<uint64_t>(out, static_cast<uint64_t>(d));
    AppendLE<uint32_t>(out, static_cast<uint32_t>(t.type));
    AppendLE<uint64_t>(out, offset);
    offset = AlignUp(offset + t.nbytes, *alignment);
  }
  out.resize(AlignUp(out.size(), *alignment), '\0');
  return out;
}

Status Writer::Emit(const std::function<Status(std::span<const uint8_t>)>& sink) const {
  uint64_t alignment = 0;
  TARMAC_ASSIGN_OR_RETURN(std::string header, BuildHeader(&alignment));
  TARMAC_RETURN_IF_ERROR(
      sink({reinterpret_cast<const uint8_t*>(header.data()), header.size()}));
  const std::vector<uint8_t> zeros(alignment, 0);
  std::vector<uint8_t> buf;
  for (const auto& t : tensors_) {
    if (t.fill) {
      buf.assign(t.nbytes, 0);
      Status st = t.fill(buf);
      if (!st.ok())
        return Status(st.code(), fmt::format("gguf writer: tensor '{}': {}", t.name, st.message()));
      TARMAC_RETURN_IF_ERROR(sink(buf));
      buf.clear();
      buf.shrink_to_fit();  // one tensor at a time, never the whole model
    } else {
      TARMAC_RETURN_IF_ERROR(sink(t.data));
    }
    // Pad every tensor, the last one too: readers may expect the data section to be a whole
    // number of aligned slots.
    uint64_t pad = AlignUp(t.nbytes, alignment) - t.nbytes;
    TARMAC_RETURN_IF_ERROR(sink({zeros.data(), pad}));
  }
  return Status::Ok();
}

Result<std::vector<uint8_t>> Writer::WriteToBuffer() const {
  std::vector<uint8_t> out;
  TARMAC_RETURN_IF_ERROR(Emit([&](std::span<const uint8_t> chunk) {
    out.insert(out.end(), chunk.begin(), chunk.end());
    return Status::Ok();
  }));
  return out;
}

Status Writer::Write(const std::string& path) const {
  // pid + counter: concurrent writes of the same path from one or several processes never
  // share a temp file (the last rename wins, each result is a whole file).
  static std::atomic<uint64_t> counter{0};
  std::string tmp = fmt::format("{}.tmp.{}.{}", path, ::getpid(), counter++);
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return IoError("gguf writer: cannot create {}: {}", tmp, std::strerror(errno));
  Status st = Emit([&](std::span<const uint8_t> chunk) -> Status {
    const uint8_t* p = chunk.data();
    size_t left = chunk.size();
    while (left > 0) {
      ssize_t n = ::write(fd, p, left);
      if (n < 0) {
        if (errno == EINTR) continue;
        return IoError("gguf writer: writing {}: {}", tmp, std::strerror(errno));
      }
      p += n;
      left -= static_cast<size_t>(n);
    }
    return Status::Ok();
  });
  if (st.ok() && ::fsync(fd) != 0)
    st = IoError("gguf writer: fsync {}: {}", tmp, std::strerror(errno));
  if (::close(fd) != 0 && st.ok())
    st = IoError("gguf writer: closing {}: {}", tmp, std::strerror(errno));
  if (st.ok() && ::rename(tmp.c_str(), path.c_str()) != 0)
    st = IoError("gguf writer: renaming {} to {}: {}", tmp, path, std::strerror(errno));
  if (!st.ok()) ::unlink(tmp.c_str());
  return st;
}

}  // namespace tarmac::gguf
