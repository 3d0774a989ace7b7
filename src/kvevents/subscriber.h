// Subscriber: the receiving end of a KV-event publisher (publisher.h), as llm-d's indexer or
// Dynamo's router would connect to a replica: a ZeroMQ SUB socket on the publisher's endpoint
// and, when given, a DEALER socket on its replay endpoint.
//
// Owns its context and sockets. Not thread-safe: one thread uses it.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "base/status.h"
#include "kvevents/wire_format.h"

namespace tarmac::kvevents {

struct Message {
  std::string topic;
  uint64_t seq = 0;
  std::string payload;  // as sent
  WireBatch batch;      // decoded
};

class Subscriber {
 public:
  // topic_prefix "" receives every topic. Errors name the endpoint.
  static Result<std::unique_ptr<Subscriber>> Connect(const std::string& endpoint, const std::string& replay_endpoint,
                                                     const std::string& topic_prefix = "");
  ~Subscriber();

  // The next live message, or none within `timeout`. Errors: a malformed message (not 3 frames,
  // a bad sequence number or payload); the message is consumed.
  Result<std::optional<Message>> Next(std::chrono::milliseconds timeout);
  // Every retained message from start_seq on, up to the end marker. Errors: no replay endpoint,
  // no end marker within `timeout`, a malformed reply.
  Result<std::vector<Message>> Replay(uint64_t start_seq, std::chrono::milliseconds timeout);

 private:
  struct Sockets;
  explicit Subscriber(std::unique_ptr<Sockets> s);
  std::unique_ptr<Sockets> s_;
};

}  // namespace tarmac::kvevents
