// RedisStore: the shared Store, on a Redis server (hiredis, synchronous) that a fleet's
// replicas share, so an entry one replica cached is a hit on another. Values are SET with a
// PX expiry; ErasePrefix walks SCAN MATCH and UNLINKs what it finds. The byte budget is the
// Redis server's (maxmemory and its eviction policy), not ours.
//
// Failure: every call is bounded by the connect and command timeouts; when the server is
// unreachable the call fails at once (counted in errors) and a reconnect is tried at most
// every retry_s, so requests keep being served, as misses, until Redis returns. A connection
// that broke while idle (Redis restarted) is replaced at once, without failing the call.
//
// Thread-safe: one connection under a mutex (callers run it off the I/O thread: blocking()).
#pragma once

#include <cstdint>
#include <initializer_list>
#include <mutex>
#include <string>
#include <string_view>

#include "cache/store.h"

struct redisContext;
struct redisReply;

namespace tarmac::cache {

struct RedisOptions {
  std::string host = "127.0.0.1";
  int port = 6379;
  int db = 0;
  std::string password;          // "" : no AUTH
  double connect_timeout_s = 0.2;
  double command_timeout_s = 0.5;
  double retry_s = 0.5;          // after a failure, no reconnect before this long
};

// "redis://[:PASSWORD@]HOST[:PORT][/DB]". Errors name what is wrong.
Result<RedisOptions> ParseRedisUrl(std::string_view url);

class RedisStore final : public Store {
 public:
  explicit RedisStore(RedisOptions options);
  ~RedisStore() override;

  Result<std::optional<std::string>> Get(const std::string& key) override;
  Status Put(const std::string& key, const std::string& value, double ttl_s) override;
  Result<bool> Erase(const std::string& key) override;
  Result<int64_t> ErasePrefix(const std::string& prefix) override;
  StoreStats stats() const override;
  const char* name() const override { return "redis"; }
  bool blocking() const override { return true; }

  // Whether the last operation found the server (for readiness and tests).
  bool connected() const;

 private:
  Status ConnectLocked();
  Status FailLocked(const std::string& what);  // drops the connection, counts, says why
  // Runs one command (reconnecting once at once if the connection went stale). The caller frees
  // the reply.
  Result<redisReply*> ExecLocked(std::initializer_list<std::string_view> argv, const char* what);

  const RedisOptions opt_;
  mutable std::mutex mu_;
  redisContext* ctx_ = nullptr;
  double retry_at_ = 0;
  int64_t errors_ = 0;
};

}  // namespace tarmac::cache
