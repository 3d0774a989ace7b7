// Publisher: the prefix cache's events on a ZeroMQ PUB socket, in vLLM's wire format
// (wire_format.h), so llm-d's precise prefix-cache scorer can follow each replica's cache.
//
// Sources are the engines (one topic each); an engine calls Notify() when it queued events and
// the publisher's thread drains every source, encodes each drain as one message (three frames:
// topic, sequence number, payload), sends it and keeps it for replay. The sequence starts at 0
// and counts every message of this publisher (all topics share it). With a replay endpoint, a
// ROUTER socket answers a request [identity, "", start_seq (8 bytes, big-endian)] with every
// retained message from start_seq on, as [identity, "", seq, payload] each, then the end marker
// [identity, "", -1 (8 bytes), ""]. A malformed request gets the end marker alone (and a
// warning in the log).
//
// The PUB socket binds (`endpoint`, e.g. tcp://*:5557: each pod's own socket, which the picker
// connects to) or connects (`connect`, e.g. tcp://epp:5557: a central subscriber's socket).
//
// Owns the ZeroMQ context, sockets and thread; borrows the sources' drain functions, which must
// stay callable until Stop returns. Thread-safety: AddSource, Notify, published() and Stop may be
// called from any thread; the sockets are used by the publisher's thread alone.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "base/status.h"
#include "kvevents/replay_buffer.h"
#include "kvevents/wire_format.h"
#include "metrics/registry.h"
#include "prefix/radix_tree.h"

namespace tarmac::kvevents {

struct PublisherConfig {
  std::string endpoint;         // bind the PUB socket here ("" : connect instead)
  std::string connect;          // or connect it here; exactly one of the two
  std::string replay_endpoint;  // bind the replay ROUTER socket here; "" : no replay
  EventFormat format = EventFormat::kArray;
  std::string medium = "CPU";
  size_t replay_buffer = 10000;         // messages kept for replay
  int32_t high_water_mark = 100000;     // messages queued per subscriber before ZeroMQ drops
  size_t max_events_per_message = 4096;
};

// One engine's events.
struct EventSource {
  std::string topic;   // "kv@<pod>@<model>"
  int32_t block_size;  // the engine's KV block size
  // Up to `max` of the oldest undrained events; thread-safe.
  std::function<std::vector<prefix::BlockEvent>(size_t max)> drain;
};

class Publisher {
 public:
  // Errors name the endpoint and why (not tcp/ipc/inproc, address in use, ...).
  static Result<std::unique_ptr<Publisher>> Create(PublisherConfig config,
                                                   std::shared_ptr<metrics::Registry> registry);
  ~Publisher();  // Stop()
  Publisher(const Publisher&) = delete;
  Publisher& operator=(const Publisher&) = delete;

  // As bound or connected (a tcp://host:* endpoint with its port filled in).
  const std::string& endpoint() const { return endpoint_; }
  const std::string& replay_endpoint() const { return replay_endpoint_; }

  // Preconditions: s.drain set, s.block_size >= 1 (asserted).
  void AddSource(EventSource s);
  // Wakes the thread to drain the sources. Never blocks.
  void Notify();
  // Messages sent so far (the next message's sequence number).
  uint64_t published() const { return published_.load(); }
  // Returns once what the sources held when it was called has been sent (at once after Stop).
  void Flush();
  // Publishes what the sources still hold, then stops the thread. Idempotent.
  void Stop();

 private:
  struct Sockets;
  Publisher(PublisherConfig config, std::unique_ptr<Sockets> sockets, std::shared_ptr<metrics::Registry> registry);
  void Run();
  void PublishPending();
  void ServeReplays();

  const PublisherConfig config_;
  std::unique_ptr<Sockets> sockets_;
  std::string endpoint_, replay_endpoint_;
  std::shared_ptr<metrics::Registry> registry_;
  metrics::Counter* messages_;
  metrics::Counter* replays_;
  ReplayBuffer replay_;  // the thread's
  std::mutex mu_;
  std::vector<EventSource> sources_;  // guarded by mu_
  std::atomic<uint64_t> published_{0};
  std::atomic<bool> stop_{false};
  std::condition_variable flushed_;
  uint64_t flush_requested_ = 0, flush_done_ = 0;  // guarded by mu_
  bool running_ = true;                            // guarded by mu_: the thread has not ended
  std::thread thread_;
};

}  // namespace tarmac::kvevents
