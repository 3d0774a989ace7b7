// The KV-event wire format of vLLM (vllm/distributed/kv_events.py), which llm-d's precise
// prefix-cache scorer and NVIDIA Dynamo's KV router decode. A message is three ZeroMQ frames:
//   topic   "kv@<pod>@<model>" (UTF-8)
//   seq     big-endian uint64, 0 for a publisher's first message
//   payload msgpack [ts float64, [event, ...], data_parallel_rank int]
// An event is, positionally (EventFormat::kArray, what llm-d's and Dynamo's decoders read):
//   ["BlockStored", block_hashes [u64...], parent_block_hash u64|nil, token_ids [int...],
//    block_size int, lora_id nil, medium str, lora_name nil]
//   ["BlockRemoved", block_hashes [u64...], medium str]
//   ["AllBlocksCleared"]
// or as a map tagged by "type" with those field names (EventFormat::kMap, newer vLLM).
//
// Encoding groups events the way vLLM does: a run of stored blocks where each is the parent of
// the next becomes one BlockStored (its parent is the first block's), a run of removals one
// BlockRemoved. Decoding (for followers: tests, the bench's stand-in picker) reads both forms
// and validates every field; errors name the field.
//
// Pure functions, thread-safe.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "tensor/kv_layout.h"
#include "prefix/radix_tree.h"

namespace tarmac::kvevents {

enum class EventFormat { kArray, kMap };
const char* EventFormatName(EventFormat f);  // "array", "map"
Result<EventFormat> ParseEventFormat(std::string_view s);

// What a publisher says about every stored block besides the block itself.
struct WireOptions {
  EventFormat format = EventFormat::kArray;
  int32_t block_size = kDefaultBlockSize;
  std::string medium = "CPU";  // where the KV blocks live (vLLM says "GPU" for its own)
  int32_t data_parallel_rank = 0;
};

// One batch (a message payload) of the events, oldest first, stamped `ts` (unix seconds).
// Preconditions: every kStored event has block_size tokens (asserted).
std::string EncodeBatch(double ts, std::span<const prefix::BlockEvent> events, const WireOptions& o);

std::string EncodeSeq(uint64_t seq);  // 8 bytes, big-endian
// Errors: not 8 bytes.
Result<uint64_t> DecodeSeq(std::string_view frame);
// The replay socket's end marker: -1 as a signed 64-bit big-endian integer.
std::string EndOfReplayMarker();

// A decoded event.
struct WireEvent {
  enum class Kind { kStored, kRemoved, kCleared };
  Kind kind = Kind::kCleared;
  std::vector<uint64_t> hashes;    // stored, removed
  std::optional<uint64_t> parent;  // stored: none for a namespace's first block
  std::vector<int32_t> tokens;     // stored: block_size tokens per hash
  int32_t block_size = 0;          // stored
  std::optional<std::string> medium;
};
struct WireBatch {
  double ts = 0;
  std::vector<WireEvent> events;
  std::optional<int64_t> data_parallel_rank;
};

// Errors (kDataLoss) name what is malformed: "events[3].token_ids: ...".
Result<WireBatch> DecodeBatch(std::string_view payload);

}  // namespace tarmac::kvevents
