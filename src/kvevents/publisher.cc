#include "kvevents/publisher.h"

#include <sys/eventfd.h>
#include <unistd.h>

#include <chrono>
#include <iterator>

#include <zmq.hpp>
#include <zmq_addon.hpp>

#include "base/check.h"
#include "base/log.h"

namespace tarmac::kvevents {

struct Publisher::Sockets {
  zmq::context_t ctx{1};
  zmq::socket_t pub{ctx, zmq::socket_type::pub};
  std::optional<zmq::socket_t> replay;
  int wake_fd = -1;  // eventfd: Notify() makes it readable
  ~Sockets() {
    if (wake_fd >= 0) ::close(wake_fd);
  }
};

namespace {

Status CheckEndpoint(const std::string& flag, const std::string& ep) {
  if (ep.rfind("tcp://", 0) == 0 || ep.rfind("ipc://", 0) == 0 || ep.rfind("inproc://", 0) == 0) return Status::Ok();
  return InvalidArgument("{} '{}': expected a ZeroMQ endpoint such as tcp://*:5557 (tcp://, ipc:// or inproc://)", flag, ep);
}

double WallSeconds() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

}  // namespace

Result<std::unique_ptr<Publisher>> Publisher::Create(PublisherConfig config, std::shared_ptr<metrics::Registry> registry) {
  TARMAC_CHECK(registry != nullptr);
  if (config.endpoint.empty() == config.connect.empty())
    return InvalidArgument("KV events: give the endpoint to bind (--kv-events) or the one to connect to "
                           "(--kv-events-connect), exactly one");
  if (config.replay_buffer < 1) return InvalidArgument("--kv-events-replay-buffer must be at least 1");
  if (!config.endpoint.empty()) TARMAC_RETURN_IF_ERROR(CheckEndpoint("--kv-events", config.endpoint));
  if (!config.connect.empty()) TARMAC_RETURN_IF_ERROR(CheckEndpoint("--kv-events-connect", config.connect));
  if (!config.replay_endpoint.empty()) TARMAC_RETURN_IF_ERROR(CheckEndpoint("--kv-events-replay", config.replay_endpoint));
  auto s = std::make_unique<Sockets>();
  s->wake_fd = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (s->wake_fd < 0) return IoError("KV events: eventfd failed");
  const std::string& where = config.endpoint.empty() ? config.connect : config.endpoint;
  try {
    s->pub.set(zmq::sockopt::sndhwm, config.high_water_mark);
    s->pub.set(zmq::sockopt::linger, 200);  // at exit, a moment for the last messages
    if (!config.endpoint.empty()) {
      s->pub.bind(config.endpoint);
    } else {
      s->pub.connect(config.connect);
    }
  } catch (const zmq::error_t& e) {
    return IoError("KV events: cannot {} {}: {}{}", config.endpoint.empty() ? "connect to" : "bind", where, e.what(),
                   config.endpoint.empty() ? "" : " (to connect to a subscriber's socket, use --kv-events-connect)");
  }
  if (!config.replay_endpoint.empty()) {
    try {
      s->replay.emplace(s->ctx, zmq::socket_type::router);
      // A whole replay is queued at once: never drop part of it at the default high-water mark.
      s->replay->set(zmq::sockopt::sndhwm, 0);
      s->replay->set(zmq::sockopt::linger, 0);
      s->replay->bind(config.replay_endpoint);
    } catch (const zmq::error_t& e) {
      return IoError("KV events: cannot bind the replay socket {}: {}", config.replay_endpoint, e.what());
    }
  }
  return std::unique_ptr<Publisher>(new Publisher(std::move(config), std::move(s), std::move(registry)));
}

Publisher::Publisher(PublisherConfig config, std::unique_ptr<Sockets> sockets, std::shared_ptr<metrics::Registry> registry)
    : config_(std::move(config)), sockets_(std::move(sockets)), registry_(std::move(registry)),
      replay_(config_.replay_buffer) {
  endpoint_ = config_.endpoint.empty() ? config_.connect : sockets_->pub.get(zmq::sockopt::last_endpoint);
  if (sockets_->replay) replay_endpoint_ = sockets_->replay->get(zmq::sockopt::last_endpoint);
  messages_ = &registry_->Counters("tarmac:kv_events_messages_total", "KV-event messages published (ZeroMQ).", {}).With({});
  replays_ = &registry_->Counters("tarmac:kv_events_replay_requests_total", "Replay requests answered.", {}).With({});
  // The sockets move to the thread here (thread creation is a full barrier).
  thread_ = std::thread([this] { Run(); });
}

Publisher::~Publisher() { Stop(); }

void Publisher::AddSource(EventSource s) {
  TARMAC_CHECK(s.drain && s.block_size >= 1);
  {
    std::lock_guard<std::mutex> lock(mu_);
    sources_.push_back(std::move(s));
  }
  Notify();
}

void Publisher::Notify() {
  const uint64_t one = 1;
  // EAGAIN only when the counter is saturated, which still means "wake up".
  [[maybe_unused]] ssize_t n = ::write(sockets_->wake_fd, &one, sizeof(one));
}

void Publisher::Stop() {
  if (stop_.exchange(true)) return;
  Notify();
  if (thread_.joinable()) thread_.join();
}

void Publisher::Run() {
  std::vector<zmq::pollitem_t> items;
  items.push_back({nullptr, sockets_->wake_fd, ZMQ_POLLIN, 0});
  if (sockets_->replay) items.push_back({sockets_->replay->handle(), 0, ZMQ_POLLIN, 0});
  while (!stop_.load()) {
    try {
      zmq::poll(items, std::chrono::milliseconds(100));
    } catch (const zmq::error_t& e) {
      if (e.num() != EINTR) TLOG_WARN("KV events: poll failed: {}", e.what());
    }
    uint64_t count;
    while (::read(sockets_->wake_fd, &count, sizeof(count)) > 0) {
    }
    ServeReplays();
    PublishPending();
  }
  PublishPending();  // what the engines queued before Stop
  std::lock_guard<std::mutex> lock(mu_);
  running_ = false;
  flushed_.notify_all();
}

void Publisher::Flush() {
  std::unique_lock<std::mutex> lock(mu_);
  const uint64_t target = ++flush_requested_;
  Notify();
  flushed_.wait(lock, [&] { return flush_done_ >= target || !running_; });
}

void Publisher::PublishPending() {
  std::lock_guard<std::mutex> lock(mu_);
  const uint64_t requested = flush_requested_;  // flushes asked for before this pass began
  for (const EventSource& src : sources_) {
    WireOptions o;
    o.format = config_.format;
    o.block_size = src.block_size;
    o.medium = config_.medium;
    for (;;) {
      std::vector<prefix::BlockEvent> events = src.drain(config_.max_events_per_message);
      if (events.empty()) break;
      const uint64_t seq = published_.load();
      std::string payload = EncodeBatch(WallSeconds(), events, o);
      try {
        sockets_->pub.send(zmq::buffer(src.topic), zmq::send_flags::sndmore);
        sockets_->pub.send(zmq::buffer(EncodeSeq(seq)), zmq::send_flags::sndmore);
        sockets_->pub.send(zmq::buffer(payload), zmq::send_flags::none);
      } catch (const zmq::error_t& e) {
        // A PUB socket drops rather than blocks; an error here is the context going away.
        TLOG_WARN("KV events: send failed: {}", e.what());
      }
      replay_.Add(seq, std::move(payload));
      published_.store(seq + 1);
      messages_->Add();
      if (events.size() < config_.max_events_per_message) break;
    }
  }
  flush_done_ = requested;
  flushed_.notify_all();
}

void Publisher::ServeReplays() {
  if (!sockets_->replay) return;
  zmq::socket_t& sock = *sockets_->replay;
  for (;;) {
    std::vector<zmq::message_t> frames;
    std::optional<size_t> got;
    try {
      got = zmq::recv_multipart(sock, std::back_inserter(frames), zmq::recv_flags::dontwait);
    } catch (const zmq::error_t& e) {
      TLOG_WARN("KV events: replay receive failed: {}", e.what());
      return;
    }
    if (!got) return;
    const std::string identity = frames[0].to_string();
    Result<uint64_t> start = frames.size() == 3 && frames[1].size() == 0
                                 ? DecodeSeq(frames[2].to_string_view())
                                 : Result<uint64_t>(DataLoss("expected [identity, \"\", start_seq], got {} frames", frames.size()));
    auto reply = [&](const std::string& seq, std::string_view payload) {
      sock.send(zmq::buffer(identity), zmq::send_flags::sndmore);
      sock.send(zmq::message_t(), zmq::send_flags::sndmore);
      sock.send(zmq::buffer(seq), zmq::send_flags::sndmore);
      sock.send(zmq::buffer(payload.data(), payload.size()), zmq::send_flags::none);
    };
    try {
      if (!start.ok()) {
        TLOG_WARN("KV events: malformed replay request: {}", start.status().message());
      } else {
        for (const ReplayBuffer::Entry* e : replay_.From(*start)) reply(EncodeSeq(e->seq), e->payload);
        replays_->Add();
      }
      reply(EndOfReplayMarker(), "");
    } catch (const zmq::error_t& e) {
      TLOG_WARN("KV events: replay send failed: {}", e.what());
    }
  }
}

}  // namespace tarmac::kvevents
