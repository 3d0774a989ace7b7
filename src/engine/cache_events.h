// CacheEventQueue: the prefix cache's events (stored / removed blocks, cleared) on their way
// out of the engine. The step thread pushes what the radix tree recorded during a step; any
// thread drains. Bounded: past `capacity` undrained events, new ones are dropped and counted
// (a follower that misses events must resynchronise; the counter tells it happened).
//
// Thread-safe (one mutex).
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <mutex>
#include <vector>

#include "prefix/radix_tree.h"

namespace tarmac::engine {

class CacheEventQueue {
 public:
  // Preconditions: capacity >= 1.
  explicit CacheEventQueue(size_t capacity);

  // Moves events in, oldest first, while there is room; returns how many were dropped.
  int64_t Push(std::vector<prefix::BlockEvent>* events);
  // Up to `max` of the oldest events.
  std::vector<prefix::BlockEvent> Drain(size_t max = SIZE_MAX);
  int64_t dropped() const;
  size_t size() const;

 private:
  const size_t capacity_;
  mutable std::mutex mu_;
  std::deque<prefix::BlockEvent> q_;
  int64_t dropped_ = 0;
};

}  // namespace tarmac::engine
