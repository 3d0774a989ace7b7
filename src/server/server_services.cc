// Server::Impl as the FlowServices of its generation flows (server_internal.h): the clock,
// the prepare workers, posting to the I/O thread, timers, and the admitted generations.
#include <fmt/format.h>

#include <algorithm>

#include "base/clock.h"
#include "server/server_internal.h"

namespace tarmac::server {

double Server::Impl::Now() const { return NowSeconds(); }

int64_t Server::Impl::TenantPrepareShare() const {
  const int64_t capacity = config_.prepare_threads + config_.prepare_queue;
  return std::max<int64_t>(1, capacity - std::max<int64_t>(1, capacity / 4));
}

void Server::Impl::ForgetPreparing(const std::string& tenant) {
  auto it = preparing_by_tenant.find(tenant);
  if (it != preparing_by_tenant.end() && --it->second <= 0) preparing_by_tenant.erase(it);
}

std::optional<ApiError> Server::Impl::OffIoThread(const std::string& tenant, std::function<Continuation()> work) {
  int64_t& mine = preparing_by_tenant[tenant];
  if (config_.keys && mine >= TenantPrepareShare()) {
    return Unavailable(fmt::format("tenant '{}' has {} requests preparing, its share of the prepare threads and "
                                   "queue (--prepare-threads, --prepare-queue); retry later",
                                   tenant, mine),
                       1);
  }
  auto job = [this, tenant, work = std::move(work)]() mutable {
    Continuation then;
    {
      std::function<Continuation()> w = std::move(work);  // its captures go here, on the worker
      then = w();
    }
    // What `then` holds (the job) is destroyed on the I/O thread, or unrun with the io_context.
    asio::post(ioc, [this, tenant, then = std::move(then)] {
      preparing--;
      ForgetPreparing(tenant);
      then();
      CheckDrained();
    });
  };
  preparing++;
  ++mine;
  if (!preparer->TrySubmit(std::move(job))) {
    preparing--;
    ForgetPreparing(tenant);
    return Unavailable(fmt::format("the server is busy preparing other requests ({} waiting, --prepare-queue); "
                                   "retry later", preparer->waiting()),
                       1);
  }
  return std::nullopt;
}

void Server::Impl::Post(std::function<void()> fn) { asio::post(ioc, std::move(fn)); }

std::function<void()> Server::Impl::ArmTimer(double at_s, std::function<void()> fire) {
  auto timer = std::make_shared<asio::steady_timer>(ioc);
  timer->expires_after(std::chrono::duration_cast<asio::steady_timer::duration>(
      std::chrono::duration<double>(std::max(0.0, at_s - Now()))));
  timer->async_wait([timer, fire = std::move(fire)](const beast::error_code& ec) {
    if (!ec) fire();
  });
  return [weak = std::weak_ptr<asio::steady_timer>(timer)] {
    if (auto t = weak.lock()) t->cancel();
  };
}

void Server::Impl::Release(int64_t id, bool was_running, int64_t generated_tokens) {
  flows.Release(id, was_running, generated_tokens, NowSeconds());
  CheckDrained();
}

}  // namespace tarmac::server
