#include "engine/request_stream.h"

#include <utility>

namespace tarmac::engine {

bool RequestStream::Next(TokenEvent* ev, std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mu_);
  if (!cv_.wait_for(lock, timeout, [&] { return !events_.empty(); })) return false;
  *ev = std::move(events_.front());
  events_.pop_front();
  return true;
}

bool RequestStream::TryNext(TokenEvent* ev) {
  std::lock_guard<std::mutex> lock(mu_);
  if (events_.empty()) return false;
  *ev = std::move(events_.front());
  events_.pop_front();
  return true;
}

bool RequestStream::done() const {
  std::lock_guard<std::mutex> lock(mu_);
  return done_;
}

void RequestStream::Push(TokenEvent ev) {
  std::function<void()> notify;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (done_) return;  // nothing follows the last event
    done_ = ev.last();
    events_.push_back(std::move(ev));
    notify = notify_;
  }
  cv_.notify_all();
  if (notify) notify();
}

void RequestStream::SetNotifier(std::function<void()> fn) {
  std::lock_guard<std::mutex> lock(mu_);
  notify_ = std::move(fn);
}

}  // namespace tarmac::engine
