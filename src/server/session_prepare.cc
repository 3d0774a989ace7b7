// Session (server_internal.h): a request's CPU-bound preparation off the I/O thread. The
// generation job (or, for /render and /tokenize, a copy of what they read) goes to the server's
// prepare workers, and what comes back runs on the I/O thread: the I/O thread never renders a
// template, encodes a prompt or compiles a grammar, so /health and every other connection go
// on while a costly request prepares.
#include <fmt/format.h>

#include <algorithm>
#include <unordered_map>

#include "server/server_internal.h"

namespace tarmac::server {
namespace {

// Encoding this much text takes well under a millisecond: less than the hop to a worker.
constexpr size_t kCheapBodyBytes = 16 << 10;

}  // namespace

int64_t Server::Impl::TenantPrepareShare() const {
  const int64_t capacity = config.prepare_threads + config.prepare_queue;
  return std::max<int64_t>(1, capacity - std::max<int64_t>(1, capacity / 4));
}

void Server::Impl::ForgetPreparing(const std::string& tenant) {
  auto it = preparing_by_tenant.find(tenant);
  if (it != preparing_by_tenant.end() && --it->second <= 0) preparing_by_tenant.erase(it);
}

bool Session::CheapToPrepare(bool constrained) const {
  return !constrained && parser_ && parser_->get().body().size() < kCheapBodyBytes;
}

void Session::OffIoThread(std::function<Then()> work, bool cheap) {
  if (cheap) {
    state_ = State::kResponding;
    return work()(this);
  }
  int64_t& mine = srv_->preparing_by_tenant[tenant_];
  if (srv_->config.keys && mine >= srv_->TenantPrepareShare()) {
    srv_->metrics.CountRejected("prepare_busy");
    return RespondError(Unavailable(fmt::format("tenant '{}' has {} requests preparing, its share of the prepare threads and "
                                                "queue (--prepare-threads, --prepare-queue); retry later",
                                                tenant_, mine),
                                    1));
  }
  std::shared_ptr<Session> self = shared_from_this();
  Server::Impl* srv = srv_;
  auto job = [self, srv, tenant = tenant_, work = std::move(work)]() mutable {
    Then then;
    std::exception_ptr failed;
    try {
      std::function<Then()> w = std::move(work);  // its captures go here, on the worker
      then = w();
    } catch (...) {
      failed = std::current_exception();
    }
    // What `then` holds (the job) is destroyed on the I/O thread, or unrun with the io_context.
    asio::post(srv->ioc, [self, srv, tenant, then = std::move(then), failed] {
      srv->preparing--;
      srv->ForgetPreparing(tenant);
      if (self->state_ != State::kClosed) {
        self->state_ = State::kResponding;
        try {
          if (failed) std::rethrow_exception(failed);
          then(self.get());
        } catch (const std::exception& e) {
          self->InternalError("preparing", e);
        }
      }
      srv->CheckDrained();
    });
  };
  state_ = State::kPreparing;
  srv_->preparing++;
  ++mine;
  if (!srv_->preparer->TrySubmit(std::move(job))) {
    srv_->preparing--;
    srv_->ForgetPreparing(tenant_);
    state_ = State::kResponding;
    srv_->metrics.CountRejected("prepare_busy");
    RespondError(Unavailable(fmt::format("the server is busy preparing other requests ({} waiting, --prepare-queue); "
                                         "retry later", srv_->preparer->waiting()),
                             1));
  }
}

void Session::PrepareGeneration() {
  // The job is the worker's until its answer comes back: the session keeps no pointer to it.
  const bool cheap = CheapToPrepare(gen_->constrained());
  JobHolder job = std::make_shared<std::unique_ptr<GenerationJob>>(std::move(gen_));
  if ((*job)->needs_decision() && !cheap) {
    OffIoThread([job]() -> Then {
      auto probe = std::make_shared<Result<router::PreparedRequests>>((*job)->Probe());
      return [job, probe](Session* s) { s->OnProbed(job, *probe); };
    }, false);
  } else {
    OffIoThread([job]() -> Then {
      std::optional<ApiError> e = (*job)->Prepare();  // cheap, so inline: an undecided route decides in it
      return [job, e](Session* s) { s->OnPrepared(job, e); };
    }, cheap);
  }
  if (state_ == State::kPreparing) WatchDisconnect();  // a client gone meanwhile drops the job
}

void Session::OnProbed(JobHolder job, const Result<router::PreparedRequests>& probe) {
  gen_ = std::move(*job);
  std::optional<ApiError> e = probe.ok() ? gen_->Decide(*probe) : FromStatus(probe.status());
  if (e) {
    gen_.reset();
    return RespondError(*e);
  }
  PrepareGeneration();  // the chosen model's requests
}

void Session::OnPrepared(JobHolder job, const std::optional<ApiError>& error) {
  gen_ = std::move(*job);
  if (error) {
    gen_.reset();
    return RespondError(*error);
  }
  // The request body is no longer needed; free it now (a long-lived stream must not pin it).
  parser_.reset();
  gen_id_ = srv_->next_gen_id++;
  if (!ArmTimeout()) return;
  if (cache_status_ == "hit") {  // no engine, so no admission slot
    admitted_model_ = gen_->model_name();
    return StartGeneration();
  }
  Admit();
}

}  // namespace tarmac::server
