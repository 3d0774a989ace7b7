// ReplayBuffer: the last `capacity` published messages (sequence number and payload), for the
// replay socket: a subscriber that missed messages asks for everything from a sequence number
// on. Older messages fall out as new ones arrive.
//
// Owns copies of the payloads. Not thread-safe: the publisher's thread owns it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <string>
#include <vector>

#include "base/status.h"

namespace tarmac::kvevents {

class ReplayBuffer {
 public:
  struct Entry {
    uint64_t seq;
    std::string payload;
  };

  // Preconditions: capacity >= 1.
  explicit ReplayBuffer(size_t capacity);

  // Preconditions: seq is greater than every retained one (asserted).
  void Add(uint64_t seq, std::string payload);
  // The retained messages with seq >= start, oldest first.
  std::vector<const Entry*> From(uint64_t start) const;
  size_t size() const { return entries_.size(); }
  size_t capacity() const { return capacity_; }

  // At most capacity entries, sequence numbers strictly increasing.
  Status CheckIntegrity() const;

 private:
  const size_t capacity_;
  std::deque<Entry> entries_;
};

}  // namespace tarmac::kvevents
