#include "server/http_server.h"

#include <cstdio>
#include <future>

#include "base/clock.h"
#include "base/log.h"
#include "base/thread_role.h"
#include "control/slo_tracker.h"
#include "server/server_internal.h"

namespace tarmac::server {

Result<std::unique_ptr<Server>> Server::Create(ServerConfig config) {
  if (config.max_body_bytes <= 0) return InvalidArgument("--max-body-bytes {}: must be > 0", config.max_body_bytes);
  if (config.prepare_threads < 1) return InvalidArgument("--prepare-threads {}: must be >= 1", config.prepare_threads);
  if (config.prepare_queue < 1) return InvalidArgument("--prepare-queue {}: must be >= 1", config.prepare_queue);
  if (config.prepare_nice < 0 || config.prepare_nice > 19)
    return InvalidArgument("--prepare-nice {}: must be in 0..19", config.prepare_nice);
  if (!config.metrics) config.metrics = std::make_shared<metrics::Registry>();
  TARMAC_ASSIGN_OR_RETURN(std::unique_ptr<cache::CacheService> caches, cache::CacheService::Create(config.cache, config.metrics));
  auto impl = std::make_unique<Impl>(std::move(config));
  impl->caches_ = std::move(caches);
  beast::error_code ec;
  auto addr = asio::ip::make_address(impl->config_.host, ec);
  if (ec) return InvalidArgument("--host '{}': not an IP address ({})", impl->config_.host, ec.message());
  tcp::endpoint ep(addr, static_cast<unsigned short>(impl->config_.port));
  impl->acceptor.open(ep.protocol(), ec);
  if (!ec) impl->acceptor.set_option(asio::socket_base::reuse_address(true), ec);
  if (!ec) impl->acceptor.bind(ep, ec);
  if (!ec) impl->acceptor.listen(asio::socket_base::max_listen_connections, ec);
  if (ec) return IoError("cannot listen on {}:{}: {}", impl->config_.host, impl->config_.port, ec.message());
  return std::unique_ptr<Server>(new Server(std::move(impl)));
}

Server::Server(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

Server::~Server() {
  // Preparations still running read the engines: they finish first (queued ones are dropped;
  // the answers they post are never run). Engines stop before the sessions that borrow them
  // go away with the io_context.
  impl_->preparer->Stop();
  impl_->pool_.Shutdown();
  impl_->router_.reset();
  impl_->flows.Clear();
  impl_->caches_.reset();  // finishes its queued jobs while the io_context they post to lives
}

int Server::port() const { return impl_->acceptor.local_endpoint().port(); }

std::shared_ptr<metrics::Registry> Server::registry() const { return impl_->config_.metrics; }

Status Server::SetRoutes(router::RouterConfig routes) {
  auto holder = std::make_shared<router::RouterConfig>(std::move(routes));
  auto done = std::make_shared<std::promise<Status>>();
  std::future<Status> result = done->get_future();
  asio::post(impl_->ioc, [impl = impl_.get(), holder, done] {
    auto r = std::make_unique<router::Router>(std::move(*holder), &impl->pool_, impl->config_.metrics);
    Status st = r->Validate();
    if (st.ok()) {
      impl->degrader = std::make_unique<RouterDegrader>(
          r.get(), impl->config_.slo_tracker ? impl->config_.slo_tracker->targets() : control::SloTargets{});
      impl->router_ = std::move(r);
    }
    done->set_value(st);
  });
  return result.get();
}

control::RouteDegrader* Server::route_degrader() {
  auto done = std::make_shared<std::promise<control::RouteDegrader*>>();
  std::future<control::RouteDegrader*> result = done->get_future();
  asio::post(impl_->ioc, [impl = impl_.get(), done] { done->set_value(impl->degrader.get()); });
  return result.get();
}

void Server::AddModel(std::unique_ptr<router::PoolModel> model, std::optional<router::AdmissionLimits> limits) {
  std::shared_ptr<router::PoolModel> holder(model.release());
  asio::post(impl_->ioc, [impl = impl_.get(), holder, limits]() mutable {
    if (limits) impl->pool_.admission().SetModelLimits(holder->name, *limits);
    auto model = std::unique_ptr<router::PoolModel>(new router::PoolModel(std::move(*holder)));
    if (model->name == impl->config_.vllm_metrics_model) impl->metrics_.WatchModelForPicker(model.get(), &impl->pool_.admission());
    impl->pool_.Add(std::move(model));
  });
}

void Server::SetReady() {
  asio::post(impl_->ioc, [impl = impl_.get()] { impl->ready = true; });
}

void Server::Stop() {
  asio::post(impl_->ioc, [impl = impl_.get()] { impl->BeginDrain(); });
}

int Server::Run() {
  Impl& s = *impl_;
  s.signals.async_wait([&s](const beast::error_code& ec, int) {
    if (!ec) s.BeginDrain();
  });
  MarkIoThread();  // router::Prepare checks it never runs here
  s.Accept();
  // The sessions catch what their requests throw (Session::InternalError); should anything
  // still escape a handler, it is logged and the loop goes on serving the others.
  for (;;) {
    try {
      s.ioc.run();
      break;
    } catch (const std::exception& e) {
      std::fprintf(stderr, "tarmac serve: internal error escaped a handler: %s\n", e.what());
    }
  }
  return 0;
}

void Server::Impl::Accept() {
  acceptor.async_accept([this](beast::error_code ec, tcp::socket socket) {
    if (stopped) return;
    if (ec == asio::error::operation_aborted) return;
    if (ec) {
      // Out of file descriptors or similar: back off instead of spinning on the error.
      auto t = std::make_shared<asio::steady_timer>(ioc, std::chrono::milliseconds(50));
      t->async_wait([this, t](const beast::error_code&) { Accept(); });
      return;
    }
    socket.set_option(tcp::no_delay(true), ec);
    std::make_shared<Session>(std::move(socket), this)->Start();
    Accept();
  });
}

std::string Server::Impl::NewRequestId() { return fmt::format("req-{:016x}", request_ids()); }

void Server::Impl::BeginDrain() {
  if (draining) return;
  draining = true;
  std::fprintf(stderr, "tarmac serve: draining (%zu requests in flight, up to %.0f s)\n", flows.size(),
               config_.drain_timeout_s);
  drain_timer.expires_after(std::chrono::milliseconds(static_cast<int64_t>(config_.drain_timeout_s * 1000)));
  drain_timer.async_wait([this](const beast::error_code& ec) {
    if (ec) return;
    drain_deadline_passed = true;
    std::vector<std::shared_ptr<GenerationFlow>> left = flows.All();
    std::fprintf(stderr, "tarmac serve: drain timeout, cancelling %zu requests\n", left.size());
    for (auto& f : left) f->Abort(Unavailable("the server is shutting down", 1));
    // Cancelled requests end within one engine step; stop regardless after a grace period.
    drain_timer.expires_after(std::chrono::seconds(2));
    drain_timer.async_wait([this](const beast::error_code& ec2) {
      if (ec2) return;
      stopped = true;
      ioc.stop();
    });
    CheckDrained();
  });
  CheckDrained();
}

void Server::Impl::CheckDrained() {
  if (!draining || stopped || !flows.empty() || preparing > 0) return;
  stopped = true;
  beast::error_code ec;
  acceptor.close(ec);
  signals.cancel(ec);
  drain_timer.cancel();
  // Let queued writes (final SSE frames, last responses) reach the sockets, then stop.
  auto t = std::make_shared<asio::steady_timer>(ioc, std::chrono::milliseconds(100));
  t->async_wait([this, t](const beast::error_code&) { ioc.stop(); });
  std::fprintf(stderr, "tarmac serve: drained, exiting\n");
}

std::string Server::Impl::RenderMetrics() const { return config_.metrics->Render(NowSeconds()); }

}  // namespace tarmac::server
