#include "kvevents/replay_buffer.h"

#include <algorithm>

#include "base/check.h"

namespace tarmac::kvevents {

ReplayBuffer::ReplayBuffer(size_t capacity) : capacity_(capacity) { TARMAC_CHECK(capacity >= 1); }

void ReplayBuffer::Add(uint64_t seq, std::string payload) {
  TARMAC_CHECK(entries_.empty() || seq > entries_.back().seq);
  if (entries_.size() == capacity_) entries_.pop_front();
  entries_.push_back(Entry{seq, std::move(payload)});
}

std::vector<const ReplayBuffer::Entry*> ReplayBuffer::From(uint64_t start) const {
  auto it = std::lower_bound(entries_.begin(), entries_.end(), start,
                             [](const Entry& e, uint64_t s) { return e.seq < s; });
  std::vector<const Entry*> out;
  for (; it != entries_.end(); ++it) out.push_back(&*it);
  return out;
}

Status ReplayBuffer::CheckIntegrity() const {
  if (entries_.size() > capacity_) return Internal("replay buffer: {} entries over capacity {}", entries_.size(), capacity_);
  for (size_t i = 1; i < entries_.size(); ++i)
    if (entries_[i].seq <= entries_[i - 1].seq)
      return Internal("replay buffer: seq {} follows {}", entries_[i].seq, entries_[i - 1].seq);
  return Status::Ok();
}

}  // namespace tarmac::kvevents
