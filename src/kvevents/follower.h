// Follower: one publisher's messages in sequence order, for a consumer that must not miss any
// (a cache index such as llm-d's, the bench's stand-in picker, the tests). It starts with a
// replay from sequence 0 (what was published before it connected), then takes live messages;
// a gap in the sequence is filled by a replay of the missing ones; a message with a sequence
// number already seen but different contents is a restarted publisher, whose stream starts
// again at 0 (with AllBlocksCleared): the follower replays it from 0. Duplicates (a live message
// already replayed) are skipped.
//
// Owns its Subscriber. Not thread-safe: one thread pumps it.
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>

#include "base/status.h"
#include "kvevents/subscriber.h"

namespace tarmac::kvevents {

class Follower {
 public:
  // Preconditions: replay_endpoint is given (a follower fills gaps through it).
  static Result<std::unique_ptr<Follower>> Connect(const std::string& endpoint, const std::string& replay_endpoint,
                                                   const std::string& topic_prefix = "");

  using Apply = std::function<void(const Message&)>;
  // Waits up to `timeout` for a message, then takes every one already queued, in sequence
  // order, calling apply for each. Returns how many were applied. Errors: a malformed message,
  // or a replay that did not answer.
  Result<int> Pump(std::chrono::milliseconds timeout, const Apply& apply);
  // Takes messages until `seq` has been applied or `timeout` passes (asking for a replay when
  // nothing arrives: a new subscription misses what was sent before it took hold); false on
  // timeout.
  Result<bool> WaitFor(uint64_t seq, std::chrono::milliseconds timeout, const Apply& apply);

  std::optional<uint64_t> last_seq() const { return last_; }
  int64_t gaps_filled() const { return gaps_filled_; }
  int64_t restarts() const { return restarts_; }
  int64_t lost() const { return lost_; }  // missing messages no replay had any more

 private:
  explicit Follower(std::unique_ptr<Subscriber> sub) : sub_(std::move(sub)) {}
  Status Take(Message m, const Apply& apply);
  Status CatchUp(uint64_t from, const Apply& apply);
  void Record(const Message& m, const Apply& apply);
  bool Seen(uint64_t seq, size_t payload_hash) const;

  std::unique_ptr<Subscriber> sub_;
  bool started_ = false;
  std::optional<uint64_t> last_;
  std::deque<std::pair<uint64_t, size_t>> recent_;  // (seq, payload hash) of recent messages
  int64_t gaps_filled_ = 0, restarts_ = 0, lost_ = 0;
};

}  // namespace tarmac::kvevents
