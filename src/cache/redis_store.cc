#include "cache/redis_store.h"

#include <hiredis/hiredis.h>

#include <charconv>
#include <memory>
#include <vector>

#include "base/check.h"
#include "base/clock.h"

namespace tarmac::cache {
namespace {

struct ReplyFree {
  void operator()(redisReply* r) const { freeReplyObject(r); }
};
using Reply = std::unique_ptr<redisReply, ReplyFree>;

timeval Timeval(double s) {
  timeval tv;
  tv.tv_sec = static_cast<time_t>(s);
  tv.tv_usec = static_cast<suseconds_t>((s - static_cast<double>(tv.tv_sec)) * 1e6);
  return tv;
}

Result<int> Number(std::string_view s, const char* what, int lo, int hi) {
  int v = 0;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || p != s.data() + s.size() || v < lo || v > hi)
    return InvalidArgument("the Redis URL's {} '{}' is not an integer in [{}, {}]", what, s, lo, hi);
  return v;
}

// A SCAN MATCH pattern matching exactly the keys that start with prefix.
std::string GlobPrefix(const std::string& prefix) {
  std::string p;
  for (char c : prefix) {
    if (c == '*' || c == '?' || c == '[' || c == ']' || c == '\\') p.push_back('\\');
    p.push_back(c);
  }
  return p + "*";
}

}  // namespace

Result<RedisOptions> ParseRedisUrl(std::string_view url) {
  constexpr std::string_view kScheme = "redis://";
  if (url.substr(0, kScheme.size()) != kScheme)
    return InvalidArgument("the Redis URL '{}' must start with redis://", url);
  std::string_view rest = url.substr(kScheme.size());
  RedisOptions o;
  if (const size_t at = rest.rfind('@'); at != std::string_view::npos) {
    std::string_view auth = rest.substr(0, at);
    if (!auth.empty() && auth[0] == ':') auth.remove_prefix(1);
    o.password = std::string(auth);
    rest = rest.substr(at + 1);
  }
  if (const size_t slash = rest.find('/'); slash != std::string_view::npos) {
    if (slash + 1 < rest.size()) {
      TARMAC_ASSIGN_OR_RETURN(o.db, Number(rest.substr(slash + 1), "database", 0, 1 << 20));
    }
    rest = rest.substr(0, slash);
  }
  if (const size_t colon = rest.rfind(':'); colon != std::string_view::npos) {
    TARMAC_ASSIGN_OR_RETURN(o.port, Number(rest.substr(colon + 1), "port", 1, 65535));
    rest = rest.substr(0, colon);
  }
  if (rest.empty()) return InvalidArgument("the Redis URL '{}' names no host", url);
  o.host = std::string(rest);
  return o;
}

RedisStore::RedisStore(RedisOptions options) : opt_(std::move(options)) {}

RedisStore::~RedisStore() {
  if (ctx_ != nullptr) redisFree(ctx_);
}

Status RedisStore::FailLocked(const std::string& what) {
  ++errors_;
  std::string why = what;
  if (ctx_ != nullptr) {
    if (ctx_->err != 0) why += std::string(": ") + ctx_->errstr;
    redisFree(ctx_);
    ctx_ = nullptr;
  }
  retry_at_ = NowSeconds() + opt_.retry_s;
  return Status(StatusCode::kIoError, fmt::format("redis at {}:{}: {}", opt_.host, opt_.port, why));
}

Status RedisStore::ConnectLocked() {
  if (ctx_ != nullptr) return Status::Ok();
  if (NowSeconds() < retry_at_) {
    ++errors_;
    return Status(StatusCode::kIoError, fmt::format("redis at {}:{} is unreachable (retrying every {} s)", opt_.host,
                                                        opt_.port, opt_.retry_s));
  }
  ctx_ = redisConnectWithTimeout(opt_.host.c_str(), opt_.port, Timeval(opt_.connect_timeout_s));
  if (ctx_ == nullptr || ctx_->err != 0) return FailLocked("cannot connect");
  if (redisSetTimeout(ctx_, Timeval(opt_.command_timeout_s)) != REDIS_OK) return FailLocked("cannot set the timeout");
  auto simple = [&](std::vector<std::string> argv, const char* what) -> Status {
    std::vector<const char*> a;
    std::vector<size_t> len;
    for (const std::string& s : argv) a.push_back(s.data()), len.push_back(s.size());
    Reply r(static_cast<redisReply*>(redisCommandArgv(ctx_, static_cast<int>(a.size()), a.data(), len.data())));
    if (!r) return FailLocked(what);
    if (r->type == REDIS_REPLY_ERROR) return FailLocked(std::string(what) + ": " + std::string(r->str, r->len));
    return Status::Ok();
  };
  if (!opt_.password.empty()) TARMAC_RETURN_IF_ERROR(simple({"AUTH", opt_.password}, "AUTH failed"));
  if (opt_.db != 0) TARMAC_RETURN_IF_ERROR(simple({"SELECT", std::to_string(opt_.db)}, "SELECT failed"));
  return Status::Ok();
}

Result<redisReply*> RedisStore::ExecLocked(std::initializer_list<std::string_view> argv, const char* what) {
  std::vector<const char*> a;
  std::vector<size_t> len;
  for (std::string_view s : argv) a.push_back(s.data()), len.push_back(s.size());
  // A connection that went stale (the server restarted) gets one fresh attempt at once.
  for (int attempt = 0; attempt < 2; ++attempt) {
    const bool had_connection = ctx_ != nullptr;
    TARMAC_RETURN_IF_ERROR(ConnectLocked());
    auto* r = static_cast<redisReply*>(redisCommandArgv(ctx_, static_cast<int>(a.size()), a.data(), len.data()));
    if (r != nullptr) return r;
    Status st = FailLocked(std::string(what) + " failed");
    if (!had_connection) return st;
    retry_at_ = 0;
  }
  return FailLocked(std::string(what) + " failed");
}

Result<std::optional<std::string>> RedisStore::Get(const std::string& key) {
  std::lock_guard<std::mutex> l(mu_);
  TARMAC_ASSIGN_OR_RETURN(redisReply* raw, ExecLocked({"GET", key}, "GET"));
  Reply r(raw);
  if (r->type == REDIS_REPLY_NIL) return std::optional<std::string>();
  if (r->type != REDIS_REPLY_STRING) return FailLocked("GET: unexpected reply");
  return std::optional<std::string>(std::string(r->str, r->len));
}

Status RedisStore::Put(const std::string& key, const std::string& value, double ttl_s) {
  TARMAC_CHECK(ttl_s > 0);
  const std::string ms = std::to_string(std::max<long long>(1, static_cast<long long>(ttl_s * 1000.0)));
  std::lock_guard<std::mutex> l(mu_);
  TARMAC_ASSIGN_OR_RETURN(redisReply* raw, ExecLocked({"SET", key, value, "PX", ms}, "SET"));
  Reply r(raw);
  if (r->type == REDIS_REPLY_ERROR) {
    ++errors_;  // e.g. OOM under maxmemory: the connection is fine
    return Status(StatusCode::kIoError, "redis SET: " + std::string(r->str, r->len));
  }
  return Status::Ok();
}

Result<bool> RedisStore::Erase(const std::string& key) {
  std::lock_guard<std::mutex> l(mu_);
  TARMAC_ASSIGN_OR_RETURN(redisReply* raw, ExecLocked({"DEL", key}, "DEL"));
  Reply r(raw);
  if (r->type != REDIS_REPLY_INTEGER) return FailLocked("DEL: unexpected reply");
  return r->integer > 0;
}

Result<int64_t> RedisStore::ErasePrefix(const std::string& prefix) {
  std::lock_guard<std::mutex> l(mu_);
  const std::string pattern = GlobPrefix(prefix);
  std::string cursor = "0";
  int64_t erased = 0;
  do {
    TARMAC_ASSIGN_OR_RETURN(redisReply* raw, ExecLocked({"SCAN", cursor, "MATCH", pattern, "COUNT", "500"}, "SCAN"));
    Reply r(raw);
    if (r->type != REDIS_REPLY_ARRAY || r->elements != 2) return FailLocked("SCAN: unexpected reply");
    cursor.assign(r->element[0]->str, r->element[0]->len);
    const redisReply* keys = r->element[1];
    if (keys->elements == 0) continue;
    std::vector<const char*> argv = {"UNLINK"};
    std::vector<size_t> len = {6};
    for (size_t i = 0; i < keys->elements; ++i) {
      argv.push_back(keys->element[i]->str);
      len.push_back(keys->element[i]->len);
    }
    Reply u(static_cast<redisReply*>(redisCommandArgv(ctx_, static_cast<int>(argv.size()), argv.data(), len.data())));
    if (!u || u->type != REDIS_REPLY_INTEGER) return FailLocked("UNLINK failed");
    erased += u->integer;
  } while (cursor != "0");
  return erased;
}

StoreStats RedisStore::stats() const {
  std::lock_guard<std::mutex> l(mu_);
  StoreStats s;
  s.errors = errors_;
  return s;
}

bool RedisStore::connected() const {
  std::lock_guard<std::mutex> l(mu_);
  return ctx_ != nullptr;
}

}  // namespace tarmac::cache
