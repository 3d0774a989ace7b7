// A real redis-server for tests: started on a free loopback port with persistence off, in
// its own scratch directory, stopped (SIGTERM, then waited for) by the destructor. Tests skip
// when Debian's redis-server is not installed.
#pragma once

#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

extern char** environ;

namespace tarmac::testing {

inline const char* kRedisServer = "/usr/bin/redis-server";

inline bool HaveRedis() { return ::access(kRedisServer, X_OK) == 0; }

// A loopback port nobody listens on right now.
inline int FreeLoopbackPort() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a));
  socklen_t len = sizeof(a);
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  ::close(fd);
  return ntohs(a.sin_port);
}

class RedisServer {
 public:
  // port 0: a free one.
  explicit RedisServer(int port = 0) : port_(port ? port : FreeLoopbackPort()) { Start(); }
  ~RedisServer() { Stop(); }
  RedisServer(const RedisServer&) = delete;
  RedisServer& operator=(const RedisServer&) = delete;

  int port() const { return port_; }
  std::string url() const { return "redis://127.0.0.1:" + std::to_string(port_); }
  bool running() const { return pid_ > 0; }

  void Start() {
    if (pid_ > 0) return;
    dir_ = std::filesystem::temp_directory_path() / ("tarmac-redis-" + std::to_string(::getpid()) + "-" + std::to_string(port_));
    std::filesystem::create_directories(dir_);
    std::vector<std::string> args = {kRedisServer, "--port", std::to_string(port_), "--bind", "127.0.0.1",
                                     "--save", "", "--appendonly", "no", "--dir", dir_.string(),
                                     "--logfile", (dir_ / "redis.log").string(), "--daemonize", "no"};
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    if (posix_spawn(&pid_, kRedisServer, nullptr, nullptr, argv.data(), environ) != 0) {
      pid_ = 0;
      return;
    }
    // Ready once it accepts connections.
    for (int i = 0; i < 200; ++i) {
      int fd = ::socket(AF_INET, SOCK_STREAM, 0);
      sockaddr_in a{};
      a.sin_family = AF_INET;
      a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
      a.sin_port = htons(static_cast<uint16_t>(port_));
      const bool up = ::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0;
      ::close(fd);
      if (up) return;
      std::this_thread::sleep_for(std::chrono::milliseconds(25));
    }
  }

  void Stop() {
    if (pid_ <= 0) return;
    ::kill(pid_, SIGTERM);
    int status = 0;
    ::waitpid(pid_, &status, 0);
    pid_ = 0;
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }

 private:
  int port_;
  pid_t pid_ = 0;
  std::filesystem::path dir_;
};

}  // namespace tarmac::testing
