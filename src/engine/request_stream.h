// RequestStream: the events of one request, from the engine's step thread to a consumer.
//
// Thread-safe: one producer (the engine) and any consumer thread. The notifier, if set, runs
// on the producer's thread after each push (an async server posts a wake-up from there); it
// must be cheap and must not call back into the engine.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>

#include "engine/engine_types.h"

namespace tarmac::engine {

class RequestStream {
 public:
  explicit RequestStream(int64_t id) : id_(id) {}
  int64_t id() const { return id_; }

  // Waits up to `timeout` for the next event; false on timeout.
  bool Next(TokenEvent* ev, std::chrono::milliseconds timeout = std::chrono::hours(24 * 365));
  // Non-blocking: false when nothing is queued.
  bool TryNext(TokenEvent* ev);
  // True once the last event was queued (it may not have been taken yet).
  bool done() const;

  // Producer side.
  void Push(TokenEvent ev);
  void SetNotifier(std::function<void()> fn);

 private:
  const int64_t id_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<TokenEvent> events_;
  bool done_ = false;
  std::function<void()> notify_;
};

}  // namespace tarmac::engine
