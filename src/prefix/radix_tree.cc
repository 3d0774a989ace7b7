#include "prefix/radix_tree.h"

#include <algorithm>
#include <queue>
#include <unordered_set>

#include "base/check.h"
#include "base/hash.h"
#include "prefix/block_hash.h"

namespace tarmac::prefix {

namespace {
struct KeyHash {
  size_t operator()(const std::vector<int32_t>& k) const {
    uint64_t h = 0x9E3779B97F4A7C15ull;
    for (int32_t t : k) h = SplitMix64(h ^ static_cast<uint32_t>(t));
    return static_cast<size_t>(h);
  }
};
}  // namespace

struct Node {
  std::vector<int32_t> key;  // [block_size] token ids; empty for a namespace root
  int32_t block = -1;        // KV block holding this key's K/V (-1 for a root)
  uint64_t hash = 0;         // chained block hash; a root holds its namespace's salt
  Node* parent = nullptr;
  std::unordered_map<std::vector<int32_t>, std::unique_ptr<Node>, KeyHash> children;
  int64_t lock = 0;          // locks of paths through or ending at this node
  uint64_t last_access = 0;
};

RadixTree::RadixTree(kv::BlockPool* pool, int32_t block_size)
    : pool_(pool), block_size_(block_size) {
  TARMAC_CHECK(pool != nullptr && block_size >= 1);
}

RadixTree::~RadixTree() {
  // Release the tree's references depth-first.
  std::vector<Node*> stack;
  for (auto& [ns, root] : roots_) stack.push_back(root.get());
  while (!stack.empty()) {
    Node* n = stack.back();
    stack.pop_back();
    if (n->block >= 0) pool_->Release(n->block, kv::Holder::kCache);
    for (auto& [k, c] : n->children) stack.push_back(c.get());
  }
}

template <class Visit>
void RadixTree::ForEachNode(Visit visit) const {
  std::vector<const Node*> stack;
  for (const auto& [ns, root] : roots_) stack.push_back(root.get());
  while (!stack.empty()) {
    const Node* n = stack.back();
    stack.pop_back();
    if (n->parent != nullptr) visit(*n);
    for (const auto& [k, c] : n->children) stack.push_back(c.get());
  }
}

void RadixTree::EnableEvents(bool on) {
  if (on && !record_events_) {
    BlockEvent e;
    e.kind = BlockEvent::Kind::kCleared;
    events_.push_back(std::move(e));
    // Anything cached before recording began is announced now, parents first.
    std::vector<const Node*> order;
    for (const auto& [ns, root] : roots_) order.push_back(root.get());
    for (size_t i = 0; i < order.size(); ++i)
      for (const auto& [k, c] : order[i]->children) order.push_back(c.get());
    for (const Node* n : order) {
      if (n->parent == nullptr) continue;
      BlockEvent s;
      s.kind = BlockEvent::Kind::kStored;
      s.hash = n->hash;
      if (n->parent->parent != nullptr) s.parent = n->parent->hash;
      s.tokens = n->key;
      s.block = n->block;
      events_.push_back(std::move(s));
    }
  }
  if (!on) events_.clear();
  record_events_ = on;
}

void RadixTree::TakeEvents(std::vector<BlockEvent>* out) {
  out->insert(out->end(), std::make_move_iterator(events_.begin()), std::make_move_iterator(events_.end()));
  events_.clear();
}

Node* RadixTree::Root(uint64_t ns) {
  auto& r = roots_[ns];
  if (!r) {
    r = std::make_unique<Node>();
    r->hash = NamespaceSalt(ns);
  }
  return r.get();
}

PrefixMatch RadixTree::Match(uint64_t ns, std::span<const int32_t> tokens, int64_t max_blocks) {
  PrefixMatch m;
  auto it = roots_.find(ns);
  if (it == roots_.end()) return m;
  Node* node = it->second.get();
  std::vector<int32_t> key(block_size_);
  const int64_t limit = std::min<int64_t>(max_blocks, static_cast<int64_t>(tokens.size()) / block_size_);
  for (int64_t i = 0; i < limit; ++i) {
    std::copy_n(tokens.begin() + i * block_size_, block_size_, key.begin());
    auto c = node->children.find(key);
    if (c == node->children.end()) break;
    node = c->second.get();
    node->last_access = ++clock_;
    m.blocks.push_back(node->block);
    m.path.push_back(node);
  }
  return m;
}

void RadixTree::Lock(const PrefixMatch& m) {
  for (Node* n : m.path) ++n->lock;
}

void RadixTree::Unlock(const PrefixMatch& m) {
  for (Node* n : m.path) {
    TARMAC_CHECK(n->lock > 0);
    --n->lock;
  }
}

int64_t RadixTree::Insert(uint64_t ns, std::span<const int32_t> tokens,
                          std::span<const int32_t> blocks) {
  TARMAC_CHECK(static_cast<int64_t>(blocks.size()) * block_size_ <= static_cast<int64_t>(tokens.size()));
  Node* node = Root(ns);
  int64_t added = 0;
  for (size_t i = 0; i < blocks.size(); ++i) {
    std::vector<int32_t> key(tokens.begin() + i * block_size_, tokens.begin() + (i + 1) * block_size_);
    auto c = node->children.find(key);
    if (c == node->children.end()) {
      auto child = std::make_unique<Node>();
      child->key = key;
      child->block = blocks[i];
      child->parent = node;
      child->hash = ChainedBlockHash(node->hash, child->key);
      pool_->Ref(blocks[i], kv::Holder::kCache);
      ++num_nodes_;
      ++added;
      if (record_events_) {
        BlockEvent e;
        e.kind = BlockEvent::Kind::kStored;
        e.hash = child->hash;
        if (node->parent != nullptr) e.parent = node->hash;
        e.tokens = child->key;
        e.block = child->block;
        events_.push_back(std::move(e));
      }
      c = node->children.emplace(std::move(key), std::move(child)).first;
    }
    node = c->second.get();
    node->last_access = ++clock_;
  }
  return added;
}

void RadixTree::RemoveLeaf(Node* n) {
  TARMAC_DCHECK(n->children.empty() && n->lock == 0 && n->parent != nullptr);
  if (record_events_) {
    BlockEvent e;
    e.kind = BlockEvent::Kind::kRemoved;
    e.hash = n->hash;
    e.block = n->block;
    events_.push_back(std::move(e));
  }
  pool_->Release(n->block, kv::Holder::kCache);
  --num_nodes_;
  n->parent->children.erase(n->key);  // destroys n
}

int64_t RadixTree::Evict(int64_t blocks_needed) {
  if (blocks_needed <= 0) return 0;
  using Entry = std::pair<uint64_t, Node*>;  // (last access, leaf)
  std::priority_queue<Entry, std::vector<Entry>, std::greater<Entry>> leaves;
  std::vector<Node*> stack;
  for (auto& [ns, root] : roots_) stack.push_back(root.get());
  while (!stack.empty()) {
    Node* n = stack.back();
    stack.pop_back();
    if (n->parent != nullptr && n->children.empty() && n->lock == 0) leaves.push({n->last_access, n});
    for (auto& [k, c] : n->children) stack.push_back(c.get());
  }
  int64_t freed = 0;
  while (freed < blocks_needed && !leaves.empty()) {
    Node* n = leaves.top().second;
    leaves.pop();
    Node* parent = n->parent;
    const int32_t block = n->block;
    RemoveLeaf(n);
    if (pool_->refcount(block) == 0) ++freed;  // else a request still holds it
    if (parent->parent != nullptr && parent->children.empty() && parent->lock == 0)
      leaves.push({parent->last_access, parent});
  }
  // Forget namespaces with nothing cached.
  for (auto it = roots_.begin(); it != roots_.end();) {
    it = it->second->children.empty() ? roots_.erase(it) : std::next(it);
  }
  return freed;
}

std::vector<int32_t> RadixTree::CachedBlocks() const {
  std::vector<int32_t> out;
  ForEachNode([&](const Node& n) { out.push_back(n.block); });
  return out;
}

std::vector<uint64_t> RadixTree::CachedBlockHashes() const {
  std::vector<uint64_t> out;
  ForEachNode([&](const Node& n) { out.push_back(n.hash); });
  return out;
}

Status RadixTree::CheckIntegrity() const {
  std::unordered_set<int32_t> seen;
  int64_t count = 0;
  std::vector<const Node*> stack;
  for (const auto& [ns, root] : roots_) {
    if (root->parent != nullptr || root->block != -1 || root->lock != 0 || root->hash != NamespaceSalt(ns))
      return Internal("radix tree: root of namespace {} is malformed", ns);
    stack.push_back(root.get());
  }
  while (!stack.empty()) {
    const Node* n = stack.back();
    stack.pop_back();
    int64_t child_locks = 0;
    for (const auto& [k, c] : n->children) {
      if (c->parent != n) return Internal("radix tree: node of block {} has a wrong parent", c->block);
      if (c->key != k || static_cast<int32_t>(k.size()) != block_size_)
        return Internal("radix tree: node of block {} is filed under a wrong key", c->block);
      if (c->block < 0 || c->block >= pool_->num_blocks())
        return Internal("radix tree: node holds invalid block {}", c->block);
      if (!seen.insert(c->block).second)
        return Internal("radix tree: block {} is cached twice", c->block);
      if (pool_->refcount(c->block) < 1 || !pool_->cached(c->block))
        return Internal("radix tree: cached block {} has no cache reference in the pool", c->block);
      if (c->hash != ChainedBlockHash(n->hash, c->key))
        return Internal("radix tree: block {} has a wrong chained hash", c->block);
      if (c->lock < 0) return Internal("radix tree: block {} has lock {}", c->block, c->lock);
      child_locks += c->lock;
      ++count;
      stack.push_back(c.get());
    }
    // Every lock of a path through a child also locked this node.
    if (n->parent != nullptr && n->lock < child_locks)
      return Internal("radix tree: block {} has lock {} below its children's {}", n->block, n->lock, child_locks);
  }
  if (count != num_nodes_) return Internal("radix tree: {} nodes found, {} counted", count, num_nodes_);
  return Status::Ok();
}

}  // namespace tarmac::prefix
