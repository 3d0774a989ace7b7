// SessionPins: conversations whose KV prefix outlives their requests. When a turn of a session
// ends, the session pins the turn's cached path in the radix tree (one lock on each node, as a
// running request holds), replacing what it pinned before, until its TTL runs out. Pinned
// blocks are never evicted by the tree; when the pool runs dry the scheduler first evicts
// unpinned prefixes, then releases sessions (least recently used first, ReleaseOldest), then
// preempts. The sessions of one namespace (tenant + model) pin at most `max_blocks` blocks
// together (counted per session, shared nodes counted in each): a retain over the budget
// releases that namespace's oldest sessions first.
//
// Owns its pins (unlocked on destruction, so it must be destroyed before the tree); borrows
// the tree. Not thread-safe: the engine's step thread owns it. Mutating: Retain, Drop, Expire,
// ReleaseOldest.
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <unordered_map>
#include <utility>

#include "base/status.h"
#include "prefix/radix_tree.h"

namespace tarmac::prefix {

// A request's membership in a session (plain value, carried by requests).
struct SessionRetain {
  uint64_t id = 0;         // 0: none; else unique per (scope, session), derived by the server
  double ttl_s = 0;        // how long the session's prefix stays pinned after a turn (> 0)
  int64_t max_blocks = 0;  // the namespace's sessions pin at most this many blocks (>= 1)
  bool operator==(const SessionRetain&) const = default;
};

// OK for no session; else the TTL must be > 0 and the budget >= 1 (field "session_id").
Status CheckSession(const SessionRetain& s);

class SessionPins {
 public:
  // Preconditions: tree outlives this.
  explicit SessionPins(RadixTree* tree);
  ~SessionPins();
  SessionPins(const SessionPins&) = delete;
  SessionPins& operator=(const SessionPins&) = delete;

  // A turn of session s (namespace ns) ended holding the cached path m: the session pins m
  // from now until now + ttl_s, replacing its previous pin; then the namespace's oldest
  // sessions are released while its pins exceed max_blocks. A path longer than max_blocks
  // alone is not pinned (the session's previous pin is dropped all the same).
  // Preconditions: s.id != 0, ttl_s > 0, max_blocks >= 1; m's nodes are in the tree (the
  // caller holds them locked, so they are).
  void Retain(uint64_t ns, const SessionRetain& s, const PrefixMatch& m, double now);
  // Releases one session's pin (no-op if it has none).
  void Drop(uint64_t id);
  // Releases every session whose TTL ran out by `now`. Returns how many.
  int64_t Expire(double now);
  // Releases sessions, least recently retained first, until the released ones pinned at least
  // `blocks` blocks or none is left. Returns how many sessions were released.
  int64_t ReleaseOldest(int64_t blocks);

  size_t num_sessions() const { return pins_.size(); }
  int64_t pinned_blocks(uint64_t ns) const;  // over the namespace's sessions
  bool has(uint64_t id) const { return pins_.count(id) != 0; }

  // Every pin's path is non-empty; the per-namespace sums and the expiry and age orders agree
  // with the pins. (The tree's own CheckIntegrity checks the locks they hold.)
  Status CheckIntegrity() const;

 private:
  struct Pin {
    uint64_t ns = 0;
    PrefixMatch path;
    double expires = 0;
    uint64_t seq = 0;  // retain order (age)
  };
  void Release(std::unordered_map<uint64_t, Pin>::iterator it);

  RadixTree* tree_;
  std::unordered_map<uint64_t, Pin> pins_;              // by session id
  std::set<std::pair<double, uint64_t>> by_expiry_;     // (expires, id)
  std::set<std::pair<uint64_t, uint64_t>> by_age_;      // (seq, id)
  std::map<uint64_t, int64_t> ns_blocks_;               // pinned blocks per namespace
  uint64_t seq_ = 0;
};

}  // namespace tarmac::prefix
