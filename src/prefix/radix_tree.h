// RadixTree: the prefix cache. A tree over full KV blocks of token ids, one tree per
// namespace (a hash of the tenant's server-side salt and the model), so a cached prefix is
// only ever reused by the namespace that computed it.
//
// Each node is one block: block_size token ids, the KV block id that holds their K/V, and its
// chained block hash (block_hash.h). The tree holds one BlockPool cache reference per node;
// requests that use a cached prefix lock the matched path (lock counts), which keeps it from
// eviction. Unlocked leaves are evicted in LRU order when the pool needs blocks.
//
// Events: with EnableEvents(true) the tree records what it stores and removes (parents always
// before their children are stored, children before their parents are removed), starting with
// a kCleared, so a follower that replays them holds exactly the tree's set of block hashes.
//
// Owns its nodes; borrows the BlockPool (must outlive the tree). Not thread-safe: the engine's
// step thread owns it. Mutating methods: Match (touches access times), Lock, Unlock, Insert,
// Evict, EnableEvents, TakeEvents.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <unordered_map>
#include <vector>

#include "base/status.h"
#include "kv/block_pool.h"

namespace tarmac::prefix {

struct Node;

// The result of a match: the cached blocks covering the first blocks.size() * block_size
// tokens, and the path of nodes (for Lock/Unlock).
struct PrefixMatch {
  std::vector<int32_t> blocks;
  std::vector<Node*> path;
  int64_t num_blocks() const { return static_cast<int64_t>(blocks.size()); }
};

// A change to the cache, for followers outside the engine (KV events).
struct BlockEvent {
  enum class Kind : uint8_t { kStored, kRemoved, kCleared };
  Kind kind = Kind::kStored;
  uint64_t hash = 0;               // kStored, kRemoved: the block's chained hash
  std::optional<uint64_t> parent;  // kStored: the parent's hash; none for a namespace's first block
  std::vector<int32_t> tokens;     // kStored: the block's block_size token ids
  int32_t block = -1;              // kStored, kRemoved: the KV block id
};

class RadixTree {
 public:
  // Preconditions: pool outlives the tree; block_size >= 1.
  RadixTree(kv::BlockPool* pool, int32_t block_size);
  ~RadixTree();  // releases every block the tree still holds
  RadixTree(const RadixTree&) = delete;
  RadixTree& operator=(const RadixTree&) = delete;

  // Longest cached prefix of `tokens` under namespace ns, in whole blocks, and at most
  // max_blocks of them. Callers pass max_blocks = (len - 1) / block_size so the last prompt
  // token is always computed (its logits are needed).
  PrefixMatch Match(uint64_t ns, std::span<const int32_t> tokens, int64_t max_blocks);

  // Lock/unlock the nodes of a match: locked nodes (and so their ancestors) are not evicted.
  // Preconditions for Unlock: the match was locked and not unlocked since.
  void Lock(const PrefixMatch& m);
  void Unlock(const PrefixMatch& m);

  // Caches the full blocks of a finished sequence: blocks[i] holds tokens
  // [i * block_size, (i + 1) * block_size). Blocks already cached under the same tokens are
  // kept as they are (the caller's copy stays the caller's); new nodes take a pool reference
  // to the caller's block. Returns the number of new nodes.
  // Preconditions: blocks.size() * block_size <= tokens.size().
  int64_t Insert(uint64_t ns, std::span<const int32_t> tokens, std::span<const int32_t> blocks);

  // Evicts unlocked leaves, least recently used first, until `blocks_needed` blocks have
  // returned to the pool's free list or nothing more can be evicted. Returns blocks freed.
  int64_t Evict(int64_t blocks_needed);

  int64_t num_nodes() const { return num_nodes_; }
  // Every block the tree holds a reference to (one per node), in no particular order.
  std::vector<int32_t> CachedBlocks() const;
  // The chained hash of every cached block, in no particular order.
  std::vector<uint64_t> CachedBlockHashes() const;

  // Starts (recording a kCleared first) or stops recording events.
  void EnableEvents(bool on);
  // Appends the events recorded since the last call to *out, oldest first.
  void TakeEvents(std::vector<BlockEvent>* out);
  int32_t block_size() const { return block_size_; }

  // Checks structure (parent/child links, keys, chained hashes), that every node's block is
  // valid, held in the pool by the cache and cached once, that lock counts are >= 0 and a node's lock count is at least
  // the sum of its children's (a locked path locks all its ancestors), and the node count.
  Status CheckIntegrity() const;

 private:
  Node* Root(uint64_t ns);
  void RemoveLeaf(Node* n);
  template <class Visit>
  void ForEachNode(Visit visit) const;  // every node but the roots

  kv::BlockPool* pool_;
  int32_t block_size_;
  std::unordered_map<uint64_t, std::unique_ptr<Node>> roots_;  // one per namespace
  int64_t num_nodes_ = 0;
  uint64_t clock_ = 0;  // logical time for LRU
  bool record_events_ = false;
  std::vector<BlockEvent> events_;  // recorded since the last TakeEvents
};

}  // namespace tarmac::prefix
