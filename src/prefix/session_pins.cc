#include "prefix/session_pins.h"

#include "base/check.h"

namespace tarmac::prefix {

Status CheckSession(const SessionRetain& s) {
  if (s.id == 0 || (s.ttl_s > 0 && s.max_blocks >= 1)) return Status::Ok();
  return InvalidField("session_id", "a session needs a TTL > 0 and a block budget >= 1 (got {} s, {} blocks)", s.ttl_s,
                      s.max_blocks);
}

SessionPins::SessionPins(RadixTree* tree) : tree_(tree) { TARMAC_CHECK(tree != nullptr); }

SessionPins::~SessionPins() {
  for (auto& [id, p] : pins_) tree_->Unlock(p.path);
}

void SessionPins::Release(std::unordered_map<uint64_t, Pin>::iterator it) {
  Pin& p = it->second;
  tree_->Unlock(p.path);
  by_expiry_.erase({p.expires, it->first});
  by_age_.erase({p.seq, it->first});
  auto n = ns_blocks_.find(p.ns);
  n->second -= p.path.num_blocks();
  if (n->second == 0) ns_blocks_.erase(n);
  pins_.erase(it);
}

void SessionPins::Retain(uint64_t ns, const SessionRetain& s, const PrefixMatch& m, double now) {
  TARMAC_CHECK(s.id != 0 && s.ttl_s > 0 && s.max_blocks >= 1);
  Drop(s.id);
  if (m.path.empty() || m.num_blocks() > s.max_blocks) return;  // nothing, or over the budget alone
  Pin p;
  p.ns = ns;
  p.path = m;
  p.expires = now + s.ttl_s;
  p.seq = ++seq_;
  tree_->Lock(p.path);
  by_expiry_.insert({p.expires, s.id});
  by_age_.insert({p.seq, s.id});
  ns_blocks_[ns] += p.path.num_blocks();
  pins_.emplace(s.id, std::move(p));
  // Over the namespace's budget: its oldest sessions go (by_age_ is oldest first; this one is
  // the newest and fits alone, so it stays).
  for (auto a = by_age_.begin(); a != by_age_.end() && pinned_blocks(ns) > s.max_blocks;) {
    auto it = pins_.find(a->second);
    ++a;
    if (it->second.ns == ns) Release(it);
  }
}

void SessionPins::Drop(uint64_t id) {
  auto it = pins_.find(id);
  if (it != pins_.end()) Release(it);
}

int64_t SessionPins::Expire(double now) {
  int64_t n = 0;
  while (!by_expiry_.empty() && by_expiry_.begin()->first <= now) {
    Release(pins_.find(by_expiry_.begin()->second));
    ++n;
  }
  return n;
}

int64_t SessionPins::ReleaseOldest(int64_t blocks) {
  int64_t released = 0, freed = 0;
  while (freed < blocks && !by_age_.empty()) {
    auto it = pins_.find(by_age_.begin()->second);
    freed += it->second.path.num_blocks();
    Release(it);
    ++released;
  }
  return released;
}

int64_t SessionPins::pinned_blocks(uint64_t ns) const {
  auto it = ns_blocks_.find(ns);
  return it == ns_blocks_.end() ? 0 : it->second;
}

Status SessionPins::CheckIntegrity() const {
  if (by_expiry_.size() != pins_.size() || by_age_.size() != pins_.size())
    return Internal("session pins: {} pins but {} expiries and {} ages", pins_.size(), by_expiry_.size(), by_age_.size());
  std::map<uint64_t, int64_t> sums;
  for (const auto& [id, p] : pins_) {
    if (p.path.path.empty()) return Internal("session {:#x} pins an empty path", id);
    if (!by_expiry_.count({p.expires, id}) || !by_age_.count({p.seq, id}))
      return Internal("session {:#x} is missing from the expiry or age order", id);
    sums[p.ns] += p.path.num_blocks();
  }
  if (sums != ns_blocks_) return Internal("session pins: per-namespace block sums disagree with the pins");
  return Status::Ok();
}

}  // namespace tarmac::prefix
