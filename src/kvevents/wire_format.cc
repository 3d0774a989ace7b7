#include "kvevents/wire_format.h"

#include <cstring>

#include <msgpack.hpp>

#include "base/check.h"

namespace tarmac::kvevents {

using prefix::BlockEvent;

namespace {

constexpr std::string_view kStored = "BlockStored";
constexpr std::string_view kRemoved = "BlockRemoved";
constexpr std::string_view kCleared = "AllBlocksCleared";

using Packer = msgpack::packer<msgpack::sbuffer>;

// Always a float64 (msgpack-c's pack_double writes integral values as integers; vLLM's ts is a
// float, and typed decoders may insist).
void PackFloat64(msgpack::sbuffer& buf, double d) {
  uint64_t bits;
  std::memcpy(&bits, &d, sizeof(bits));
  char out[9];
  out[0] = static_cast<char>(0xcb);
  for (int i = 8; i >= 1; --i, bits >>= 8) out[i] = static_cast<char>(bits & 0xff);
  buf.write(out, sizeof(out));
}

void PackStr(Packer& pk, std::string_view s) {
  pk.pack_str(static_cast<uint32_t>(s.size()));
  pk.pack_str_body(s.data(), static_cast<uint32_t>(s.size()));
}

// One wire event: a run of events of one kind, grouped.
struct Group {
  BlockEvent::Kind kind;
  std::vector<const BlockEvent*> events;
};

// Stored blocks group while each is the parent of the next; removals group while consecutive.
std::vector<Group> GroupEvents(std::span<const BlockEvent> events) {
  std::vector<Group> out;
  for (const BlockEvent& e : events) {
    bool joins = false;
    if (!out.empty() && out.back().kind == e.kind && e.kind != BlockEvent::Kind::kCleared) {
      joins = e.kind == BlockEvent::Kind::kRemoved || (e.parent && *e.parent == out.back().events.back()->hash);
    }
    if (!joins) out.push_back(Group{e.kind, {}});
    out.back().events.push_back(&e);
  }
  return out;
}

// A field: its name first in the map form, nothing in the array form.
void Field(Packer& pk, EventFormat f, std::string_view name) {
  if (f == EventFormat::kMap) PackStr(pk, name);
}

void PackHashes(Packer& pk, const Group& g) {
  pk.pack_array(static_cast<uint32_t>(g.events.size()));
  for (const BlockEvent* e : g.events) pk.pack_uint64(e->hash);
}

// An event's head: the array or map of `fields` fields after the tag, then the tag.
void BeginEvent(Packer& pk, EventFormat f, std::string_view tag, uint32_t fields) {
  if (f == EventFormat::kMap) {
    pk.pack_map(fields + 1);
    PackStr(pk, "type");
  } else {
    pk.pack_array(fields + 1);
  }
  PackStr(pk, tag);
}

void PackStored(Packer& pk, const Group& g, const WireOptions& o) {
  BeginEvent(pk, o.format, kStored, 7);
  Field(pk, o.format, "block_hashes");
  PackHashes(pk, g);
  Field(pk, o.format, "parent_block_hash");
  const BlockEvent& first = *g.events.front();
  if (first.parent) {
    pk.pack_uint64(*first.parent);
  } else {
    pk.pack_nil();
  }
  Field(pk, o.format, "token_ids");
  pk.pack_array(static_cast<uint32_t>(g.events.size() * static_cast<size_t>(o.block_size)));
  for (const BlockEvent* e : g.events) {
    TARMAC_CHECK(static_cast<int32_t>(e->tokens.size()) == o.block_size);
    for (int32_t t : e->tokens) pk.pack_int32(t);
  }
  Field(pk, o.format, "block_size");
  pk.pack_int32(o.block_size);
  Field(pk, o.format, "lora_id");
  pk.pack_nil();
  Field(pk, o.format, "medium");
  PackStr(pk, o.medium);
  Field(pk, o.format, "lora_name");
  pk.pack_nil();
}

void PackRemoved(Packer& pk, const Group& g, const WireOptions& o) {
  BeginEvent(pk, o.format, kRemoved, 2);
  Field(pk, o.format, "block_hashes");
  PackHashes(pk, g);
  Field(pk, o.format, "medium");
  PackStr(pk, o.medium);
}

// ---- decoding ----

using Obj = msgpack::object;

std::string_view StrOf(const Obj& o) { return std::string_view(o.via.str.ptr, o.via.str.size); }

Result<uint64_t> HashOf(const Obj& o, const std::string& where) {
  if (o.type == msgpack::type::POSITIVE_INTEGER) return o.via.u64;
  if (o.type == msgpack::type::NEGATIVE_INTEGER) return static_cast<uint64_t>(o.via.i64);
  // Newer vLLM may send hash bytes: their last 8 bytes, big-endian, as llm-d reads them.
  if (o.type == msgpack::type::BIN && o.via.bin.size > 0) {
    uint64_t h = 0;
    const uint32_t n = o.via.bin.size;
    for (uint32_t i = n > 8 ? n - 8 : 0; i < n; ++i) h = (h << 8) | static_cast<uint8_t>(o.via.bin.ptr[i]);
    return h;
  }
  return DataLoss("{}: a block hash must be an integer or bytes", where);
}

Result<std::vector<uint64_t>> HashesOf(const Obj& o, const std::string& where) {
  if (o.type != msgpack::type::ARRAY) return DataLoss("{}: expected an array of block hashes", where);
  std::vector<uint64_t> out;
  for (uint32_t i = 0; i < o.via.array.size; ++i) {
    TARMAC_ASSIGN_OR_RETURN(uint64_t h, HashOf(o.via.array.ptr[i], fmt::format("{}[{}]", where, i)));
    out.push_back(h);
  }
  return out;
}

Result<std::optional<std::string>> OptStr(const Obj& o, const std::string& where) {
  if (o.type == msgpack::type::NIL) return std::optional<std::string>();
  if (o.type != msgpack::type::STR) return DataLoss("{}: expected a string or nil", where);
  return std::optional<std::string>(std::string(StrOf(o)));
}

// The fields of one event by name, from either form.
struct Fields {
  std::string tag;
  std::vector<std::pair<std::string, const Obj*>> named;
  const Obj* Get(std::string_view name) const {
    for (const auto& [k, v] : named)
      if (k == name) return v;
    return nullptr;
  }
};

const std::vector<std::string_view>& FieldOrder(std::string_view tag) {
  static const std::vector<std::string_view> kStoredFields = {"block_hashes", "parent_block_hash", "token_ids",
                                                              "block_size",   "lora_id",           "medium",
                                                              "lora_name"};
  static const std::vector<std::string_view> kRemovedFields = {"block_hashes", "medium"};
  static const std::vector<std::string_view> kNone;
  if (tag == kStored) return kStoredFields;
  if (tag == kRemoved) return kRemovedFields;
  return kNone;
}

Result<Fields> FieldsOf(const Obj& o, const std::string& where) {
  Fields f;
  if (o.type == msgpack::type::ARRAY) {
    if (o.via.array.size < 1 || o.via.array.ptr[0].type != msgpack::type::STR)
      return DataLoss("{}: a positional event starts with its tag string", where);
    f.tag = std::string(StrOf(o.via.array.ptr[0]));
    const auto& order = FieldOrder(f.tag);
    for (uint32_t i = 1; i < o.via.array.size && i - 1 < order.size(); ++i)
      f.named.emplace_back(std::string(order[i - 1]), &o.via.array.ptr[i]);
    return f;
  }
  if (o.type == msgpack::type::MAP) {
    for (uint32_t i = 0; i < o.via.map.size; ++i) {
      const msgpack::object_kv& kv = o.via.map.ptr[i];
      if (kv.key.type != msgpack::type::STR) return DataLoss("{}: map keys must be strings", where);
      std::string key(StrOf(kv.key));
      if (key == "type") {
        if (kv.val.type != msgpack::type::STR) return DataLoss("{}.type: expected a string", where);
        f.tag = std::string(StrOf(kv.val));
      } else {
        f.named.emplace_back(std::move(key), &kv.val);
      }
    }
    if (f.tag.empty()) return DataLoss("{}: a tagged event needs a \"type\"", where);
    return f;
  }
  return DataLoss("{}: an event must be an array or a map", where);
}

Result<WireEvent> DecodeStored(const Fields& f, const std::string& where) {
  WireEvent e;
  e.kind = WireEvent::Kind::kStored;
  const Obj* hashes = f.Get("block_hashes");
  const Obj* parent = f.Get("parent_block_hash");
  const Obj* tokens = f.Get("token_ids");
  const Obj* size = f.Get("block_size");
  if (!hashes || !parent || !tokens || !size)
    return DataLoss("{}: BlockStored needs block_hashes, parent_block_hash, token_ids and block_size", where);
  TARMAC_ASSIGN_OR_RETURN(e.hashes, HashesOf(*hashes, where + ".block_hashes"));
  if (parent->type != msgpack::type::NIL) {
    TARMAC_ASSIGN_OR_RETURN(uint64_t p, HashOf(*parent, where + ".parent_block_hash"));
    e.parent = p;
  }
  if (size->type != msgpack::type::POSITIVE_INTEGER || size->via.u64 < 1 || size->via.u64 > (1u << 20))
    return DataLoss("{}.block_size: expected a positive integer", where);
  e.block_size = static_cast<int32_t>(size->via.u64);
  if (tokens->type != msgpack::type::ARRAY) return DataLoss("{}.token_ids: expected an array", where);
  for (uint32_t i = 0; i < tokens->via.array.size; ++i) {
    const Obj& t = tokens->via.array.ptr[i];
    if (t.type != msgpack::type::POSITIVE_INTEGER || t.via.u64 > INT32_MAX)
      return DataLoss("{}.token_ids[{}]: expected a token id", where, i);
    e.tokens.push_back(static_cast<int32_t>(t.via.u64));
  }
  if (e.hashes.empty() || e.tokens.size() != e.hashes.size() * static_cast<size_t>(e.block_size))
    return DataLoss("{}: {} token ids for {} blocks of {}", where, e.tokens.size(), e.hashes.size(), e.block_size);
  if (const Obj* m = f.Get("medium")) {
    TARMAC_ASSIGN_OR_RETURN(e.medium, OptStr(*m, where + ".medium"));
  }
  return e;
}

Result<WireEvent> DecodeEvent(const Obj& o, const std::string& where) {
  TARMAC_ASSIGN_OR_RETURN(Fields f, FieldsOf(o, where));
  if (f.tag == kStored) return DecodeStored(f, where);
  WireEvent e;
  if (f.tag == kRemoved) {
    e.kind = WireEvent::Kind::kRemoved;
    const Obj* hashes = f.Get("block_hashes");
    if (!hashes) return DataLoss("{}: BlockRemoved needs block_hashes", where);
    TARMAC_ASSIGN_OR_RETURN(e.hashes, HashesOf(*hashes, where + ".block_hashes"));
    if (const Obj* m = f.Get("medium")) {
      TARMAC_ASSIGN_OR_RETURN(e.medium, OptStr(*m, where + ".medium"));
    }
    return e;
  }
  if (f.tag == kCleared) return e;
  return DataLoss("{}: unknown event tag '{}'", where, f.tag);
}

}  // namespace

const char* EventFormatName(EventFormat f) { return f == EventFormat::kArray ? "array" : "map"; }

Result<EventFormat> ParseEventFormat(std::string_view s) {
  if (s == "array") return EventFormat::kArray;
  if (s == "map") return EventFormat::kMap;
  return InvalidArgument("unknown KV-event format '{}' (array: positional events, as llm-d and Dynamo read them; "
                         "map: events tagged by \"type\", as newer vLLM writes them)", s);
}

std::string EncodeBatch(double ts, std::span<const BlockEvent> events, const WireOptions& o) {
  TARMAC_CHECK(o.block_size >= 1);
  const std::vector<Group> groups = GroupEvents(events);
  msgpack::sbuffer buf;
  Packer pk(&buf);
  pk.pack_array(3);
  PackFloat64(buf, ts);
  pk.pack_array(static_cast<uint32_t>(groups.size()));
  for (const Group& g : groups) {
    switch (g.kind) {
      case BlockEvent::Kind::kStored: PackStored(pk, g, o); break;
      case BlockEvent::Kind::kRemoved: PackRemoved(pk, g, o); break;
      case BlockEvent::Kind::kCleared: BeginEvent(pk, o.format, kCleared, 0); break;
    }
  }
  pk.pack_int32(o.data_parallel_rank);
  return std::string(buf.data(), buf.size());
}

std::string EncodeSeq(uint64_t seq) {
  std::string out(8, '\0');
  for (int i = 7; i >= 0; --i, seq >>= 8) out[static_cast<size_t>(i)] = static_cast<char>(seq & 0xff);
  return out;
}

Result<uint64_t> DecodeSeq(std::string_view frame) {
  if (frame.size() != 8) return DataLoss("a sequence number is 8 bytes (big-endian), got {}", frame.size());
  uint64_t v = 0;
  for (char c : frame) v = (v << 8) | static_cast<uint8_t>(c);
  return v;
}

std::string EndOfReplayMarker() { return std::string(8, '\xff'); }

Result<WireBatch> DecodeBatch(std::string_view payload) {
  msgpack::object_handle oh;
  try {
    size_t off = 0;
    // Bounds a hostile payload's allocations: arrays, maps, strings, bins, exts, depth.
    const msgpack::unpack_limit limit(1u << 24, 64, 1u << 16, 1u << 10, 0, 8);
    oh = msgpack::unpack(payload.data(), payload.size(), off, nullptr, nullptr, limit);
    if (off != payload.size()) return DataLoss("payload: {} bytes after the batch", payload.size() - off);
  } catch (const std::exception& e) {
    return DataLoss("payload: not msgpack ({})", e.what());
  }
  const Obj& root = oh.get();
  if (root.type != msgpack::type::ARRAY || root.via.array.size < 2 || root.via.array.size > 3)
    return DataLoss("payload: expected [ts, events, data_parallel_rank]");
  WireBatch b;
  const Obj& ts = root.via.array.ptr[0];
  if (ts.type != msgpack::type::FLOAT64 && ts.type != msgpack::type::FLOAT32)
    return DataLoss("payload[0] (ts): expected a float");
  b.ts = ts.via.f64;
  const Obj& events = root.via.array.ptr[1];
  if (events.type != msgpack::type::ARRAY) return DataLoss("payload[1] (events): expected an array");
  for (uint32_t i = 0; i < events.via.array.size; ++i) {
    TARMAC_ASSIGN_OR_RETURN(WireEvent e, DecodeEvent(events.via.array.ptr[i], fmt::format("events[{}]", i)));
    b.events.push_back(std::move(e));
  }
  if (root.via.array.size == 3) {
    const Obj& r = root.via.array.ptr[2];
    if (r.type == msgpack::type::POSITIVE_INTEGER) {
      b.data_parallel_rank = static_cast<int64_t>(r.via.u64);
    } else if (r.type != msgpack::type::NIL) {
      return DataLoss("payload[2] (data_parallel_rank): expected an integer or nil");
    }
  }
  return b;
}

}  // namespace tarmac::kvevents
