#include "kvevents/follower.h"

#include <functional>

#include "base/check.h"

namespace tarmac::kvevents {

namespace {
constexpr auto kReplayTimeout = std::chrono::milliseconds(5000);
constexpr size_t kRecent = 1 << 16;  // messages remembered to tell duplicates from a restart
size_t HashOf(const std::string& payload) { return std::hash<std::string>{}(payload); }
}  // namespace

Result<std::unique_ptr<Follower>> Follower::Connect(const std::string& endpoint, const std::string& replay_endpoint,
                                                    const std::string& topic_prefix) {
  TARMAC_CHECK(!replay_endpoint.empty());
  TARMAC_ASSIGN_OR_RETURN(std::unique_ptr<Subscriber> sub, Subscriber::Connect(endpoint, replay_endpoint, topic_prefix));
  return std::unique_ptr<Follower>(new Follower(std::move(sub)));
}

bool Follower::Seen(uint64_t seq, size_t payload_hash) const {
  for (auto it = recent_.rbegin(); it != recent_.rend(); ++it)
    if (it->first == seq) return it->second == payload_hash;
  return false;
}

void Follower::Record(const Message& m, const Apply& apply) {
  apply(m);
  last_ = m.seq;
  recent_.emplace_back(m.seq, HashOf(m.payload));
  if (recent_.size() > kRecent) recent_.pop_front();
}

Status Follower::CatchUp(uint64_t from, const Apply& apply) {
  TARMAC_ASSIGN_OR_RETURN(std::vector<Message> missed, sub_->Replay(from, kReplayTimeout));
  if (!missed.empty() && missed.front().seq > from) lost_ += static_cast<int64_t>(missed.front().seq - from);
  for (Message& m : missed)
    if (!last_ || m.seq > *last_) Record(m, apply);
  return Status::Ok();
}

Status Follower::Take(Message m, const Apply& apply) {
  if (last_ && m.seq <= *last_) {
    if (Seen(m.seq, HashOf(m.payload))) return Status::Ok();  // already replayed
    // Same numbers, other contents: the publisher restarted and counts from 0 again.
    ++restarts_;
    last_.reset();
    recent_.clear();
    return CatchUp(0, apply);
  }
  const uint64_t expected = last_ ? *last_ + 1 : 0;
  if (m.seq > expected) {
    ++gaps_filled_;
    TARMAC_RETURN_IF_ERROR(CatchUp(expected, apply));
    if (last_ && m.seq <= *last_) return Status::Ok();  // the replay brought it too
  }
  Record(m, apply);
  return Status::Ok();
}

Result<int> Follower::Pump(std::chrono::milliseconds timeout, const Apply& apply) {
  int applied = 0;
  auto count = [&](const Message& m) {
    ++applied;
    apply(m);
  };
  if (!started_) {
    // What was published before this follower connected.
    started_ = true;
    TARMAC_RETURN_IF_ERROR(CatchUp(0, count));
  }
  for (auto wait = timeout;; wait = std::chrono::milliseconds(0)) {
    TARMAC_ASSIGN_OR_RETURN(std::optional<Message> m, sub_->Next(wait));
    if (!m) return applied;
    TARMAC_RETURN_IF_ERROR(Take(std::move(*m), count));
  }
}

Result<bool> Follower::WaitFor(uint64_t seq, std::chrono::milliseconds timeout, const Apply& apply) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!last_ || *last_ < seq) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) return false;
    TARMAC_ASSIGN_OR_RETURN(int n, Pump(std::min(left, std::chrono::milliseconds(50)), apply));
    // Nothing live: what was sent before the subscription took hold may never come live.
    if (n == 0) TARMAC_RETURN_IF_ERROR(CatchUp(last_ ? *last_ + 1 : 0, apply));
  }
  return true;
}

}  // namespace tarmac::kvevents
