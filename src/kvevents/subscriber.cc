#include "kvevents/subscriber.h"

#include <iterator>

#include <zmq.hpp>
#include <zmq_addon.hpp>

namespace tarmac::kvevents {

struct Subscriber::Sockets {
  zmq::context_t ctx{1};
  zmq::socket_t sub{ctx, zmq::socket_type::sub};
  std::optional<zmq::socket_t> replay;
};

namespace {

Result<Message> ToMessage(std::vector<zmq::message_t>& frames) {
  if (frames.size() != 3) return DataLoss("a KV-event message has 3 frames (topic, seq, payload), got {}", frames.size());
  Message m;
  m.topic = frames[0].to_string();
  TARMAC_ASSIGN_OR_RETURN(m.seq, DecodeSeq(frames[1].to_string_view()));
  m.payload = frames[2].to_string();
  TARMAC_ASSIGN_OR_RETURN(m.batch, DecodeBatch(m.payload));
  return m;
}

}  // namespace

Result<std::unique_ptr<Subscriber>> Subscriber::Connect(const std::string& endpoint, const std::string& replay_endpoint,
                                                        const std::string& topic_prefix) {
  auto s = std::make_unique<Sockets>();
  try {
    s->sub.set(zmq::sockopt::linger, 0);
    s->sub.set(zmq::sockopt::rcvhwm, 0);  // a follower must not lose messages to its own queue
    s->sub.set(zmq::sockopt::subscribe, topic_prefix);
    s->sub.connect(endpoint);
  } catch (const zmq::error_t& e) {
    return IoError("KV events: cannot subscribe to {}: {}", endpoint, e.what());
  }
  if (!replay_endpoint.empty()) {
    try {
      s->replay.emplace(s->ctx, zmq::socket_type::dealer);
      s->replay->set(zmq::sockopt::linger, 0);
      s->replay->connect(replay_endpoint);
    } catch (const zmq::error_t& e) {
      return IoError("KV events: cannot connect to the replay endpoint {}: {}", replay_endpoint, e.what());
    }
  }
  return std::unique_ptr<Subscriber>(new Subscriber(std::move(s)));
}

Subscriber::Subscriber(std::unique_ptr<Sockets> s) : s_(std::move(s)) {}
Subscriber::~Subscriber() = default;

Result<std::optional<Message>> Subscriber::Next(std::chrono::milliseconds timeout) {
  std::vector<zmq::pollitem_t> items = {{s_->sub.handle(), 0, ZMQ_POLLIN, 0}};
  if (zmq::poll(items, timeout) == 0) return std::optional<Message>();
  std::vector<zmq::message_t> frames;
  if (!zmq::recv_multipart(s_->sub, std::back_inserter(frames), zmq::recv_flags::dontwait))
    return std::optional<Message>();
  TARMAC_ASSIGN_OR_RETURN(Message m, ToMessage(frames));
  return std::optional<Message>(std::move(m));
}

Result<std::vector<Message>> Subscriber::Replay(uint64_t start_seq, std::chrono::milliseconds timeout) {
  if (!s_->replay) return InvalidArgument("KV events: this subscriber has no replay endpoint");
  zmq::socket_t& sock = *s_->replay;
  sock.send(zmq::message_t(), zmq::send_flags::sndmore);
  sock.send(zmq::buffer(EncodeSeq(start_seq)), zmq::send_flags::none);
  std::vector<Message> out;
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    std::vector<zmq::pollitem_t> items = {{sock.handle(), 0, ZMQ_POLLIN, 0}};
    if (left.count() <= 0 || zmq::poll(items, left) == 0)
      return IoError("KV events: no end of replay within {} ms ({} messages so far)", timeout.count(), out.size());
    std::vector<zmq::message_t> frames;
    (void)zmq::recv_multipart(sock, std::back_inserter(frames));
    // [""(delimiter), seq, payload]; the end marker's payload is empty.
    if (frames.size() != 3 || frames[0].size() != 0) return DataLoss("KV events: a replay reply has 3 frames");
    if (frames[1].to_string_view() == EndOfReplayMarker()) return out;
    frames.erase(frames.begin());
    frames.insert(frames.begin(), zmq::message_t());  // no topic on the replay socket
    TARMAC_ASSIGN_OR_RETURN(Message m, ToMessage(frames));
    out.push_back(std::move(m));
  }
}

}  // namespace tarmac::kvevents
