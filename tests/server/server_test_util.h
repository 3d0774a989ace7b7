// Helpers for the server integration tests: start `tarmac serve` on a free loopback port and
// talk raw HTTP/1.1 to it over POSIX sockets (so tests can send malformed bytes and drop
// connections mid-stream).
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "common/test_util.h"

namespace tarmac::testing {

inline int Connect(int port) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = htons(static_cast<uint16_t>(port));
  if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0) {
    ::close(fd);
    return -1;
  }
  timeval tv{120, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  return fd;
}

inline bool SendAll(int fd, const std::string& s) {
  size_t off = 0;
  while (off < s.size()) {
    ssize_t n = ::send(fd, s.data() + off, s.size() - off, MSG_NOSIGNAL);
    if (n <= 0) return false;
    off += static_cast<size_t>(n);
  }
  return true;
}

struct HttpResponse {
  int status = 0;  // 0: no response
  std::string headers;
  std::string body;  // de-chunked
  std::string Header(const std::string& name) const {
    std::string h = headers, n = name + ":";
    for (auto& c : h) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    for (auto& c : n) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    auto p = h.find("\r\n" + n);
    if (p == std::string::npos) return "";
    p += 2 + n.size();
    auto e = h.find("\r\n", p);
    std::string v = headers.substr(p, e - p);
    while (!v.empty() && v.front() == ' ') v.erase(v.begin());
    return v;
  }
};

inline std::string Dechunk(const std::string& s) {
  std::string out;
  size_t p = 0;
  while (p < s.size()) {
    size_t e = s.find("\r\n", p);
    if (e == std::string::npos) break;
    size_t n = std::stoul(s.substr(p, e - p), nullptr, 16);
    if (n == 0) break;
    out += s.substr(e + 2, n);
    p = e + 2 + n + 2;
  }
  return out;
}

inline HttpResponse ParseResponse(const std::string& raw) {
  HttpResponse r;
  if (raw.rfind("HTTP/1.1 ", 0) != 0 || raw.size() < 12) return r;
  r.status = std::stoi(raw.substr(9, 3));
  size_t e = raw.find("\r\n\r\n");
  if (e == std::string::npos) return r;
  r.headers = raw.substr(0, e);
  r.body = raw.substr(e + 4);
  if (r.Header("Transfer-Encoding") == "chunked") r.body = Dechunk(r.body);
  return r;
}

// Sends raw bytes and reads until the server closes (requests carry Connection: close).
inline HttpResponse RawExchange(int port, const std::string& bytes) {
  int fd = Connect(port);
  if (fd < 0) return {};
  SendAll(fd, bytes);
  std::string raw;
  char buf[65536];
  ssize_t n;
  while ((n = ::recv(fd, buf, sizeof(buf), 0)) > 0) raw.append(buf, static_cast<size_t>(n));
  ::close(fd);
  return ParseResponse(raw);
}

inline std::string Request(const std::string& method, const std::string& path, const std::string& body,
                           const std::string& extra_headers = "") {
  std::string r = method + " " + path + " HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n" + extra_headers;
  if (!body.empty() || method == "POST") {
    r += "Content-Type: application/json\r\nContent-Length: " + std::to_string(body.size()) + "\r\n";
  }
  return r + "\r\n" + body;
}

inline HttpResponse Post(int port, const std::string& path, const std::string& body, const std::string& headers = "") {
  return RawExchange(port, Request("POST", path, body, headers));
}
inline HttpResponse Get(int port, const std::string& path, const std::string& headers = "") {
  return RawExchange(port, Request("GET", path, "", headers));
}

// Installs the npm packages pinned in DIR/package-lock.json (`npm ci`) once for every test that
// needs them: ctest -j runs such tests at once, so one installs under DIR/.npm-install.lock while
// the others wait, and a marker written only after `npm ci` succeeded tells a finished install
// from a partial one. Returns "" on success, else why not (npm's output is in log_path).
inline std::string NpmCiOnce(const std::string& dir, const std::string& log_path) {
  if (std::system("command -v node >/dev/null 2>&1 && command -v npm >/dev/null 2>&1") != 0)
    return "node/npm not installed (scripts/install-deps.sh installs them)";
  const std::string cmd = "cd " + dir + " && flock .npm-install.lock sh -c 'test -f node_modules/.tarmac-installed || " +
                          "(npm ci --no-audit --no-fund --loglevel=error && touch node_modules/.tarmac-installed)' > " +
                          log_path + " 2>&1";
  if (std::system(cmd.c_str()) != 0) return "npm ci in " + dir + " failed (no registry access?): " + Slurp(log_path);
  return "";
}

// `tarmac serve` as a child process on a free port; killed (SIGKILL) on destruction if alive.
class ServerProcess {
 public:
  // Port 0: the server picks a free port and logs it; WaitReady reads it from the log (no
  // race with other tests choosing ports at the same time).
  // with_default_model: serve wp-11m (-m); false when `extra` names the models (--config).
  ServerProcess(std::vector<std::string> extra, const std::string& log_path, bool with_default_model = true)
      : log_path_(log_path) {
    std::vector<std::string> args = {kTarmacBinary, "serve", "--port", "0", "--threads", "2"};
    if (with_default_model) args.insert(args.end(), {"-m", kWp11m});
    args.insert(args.end(), extra.begin(), extra.end());
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 1, log_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    posix_spawn_file_actions_addopen(&fa, 2, log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    posix_spawn(&pid_, kTarmacBinary.c_str(), &fa, nullptr, argv.data(), environ);
    posix_spawn_file_actions_destroy(&fa);
  }
  ~ServerProcess() {
    if (pid_ > 0 && !exited_) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
  }
  int port() const { return port_; }
  pid_t pid() const { return pid_; }
  // Waits until /health answers 200 (with the key headers when given).
  bool WaitReady(double seconds = 60) {
    auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(static_cast<int>(seconds * 1000));
    while (std::chrono::steady_clock::now() < end) {
      if (!Alive()) return false;
      if (port_ == 0) {
        const std::string log = Slurp(log_path_), key = "listening on http://127.0.0.1:";
        const size_t p = log.find(key);
        if (p != std::string::npos) port_ = std::atoi(log.c_str() + p + key.size());
        if (port_ == 0) {
          std::this_thread::sleep_for(std::chrono::milliseconds(20));
          continue;
        }
      }
      if (Get(port_, "/health").status == 200) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return false;
  }
  bool Alive() {
    if (exited_) return false;
    int st = 0;
    pid_t r = ::waitpid(pid_, &st, WNOHANG);
    if (r == pid_) {
      exited_ = true;
      exit_code_ = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
      return false;
    }
    return true;
  }
  // Waits for exit; returns the exit code or -1 on timeout.
  int WaitExit(double seconds) {
    auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(static_cast<int>(seconds * 1000));
    while (std::chrono::steady_clock::now() < end) {
      if (!Alive()) return exit_code_;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return -1;
  }
  long RssKib() const {
    std::string s = Slurp("/proc/" + std::to_string(pid_) + "/status");
    auto p = s.find("VmRSS:");
    return p == std::string::npos ? -1 : std::stol(s.substr(p + 6));
  }

 private:
  std::string log_path_;
  int port_ = 0;
  pid_t pid_ = -1;
  bool exited_ = false;
  int exit_code_ = -1;
};

// Value of an unlabelled-or-labelled metric line starting with `prefix` in /metrics text.
inline double MetricValue(const std::string& text, const std::string& prefix) {
  size_t p = 0;
  while ((p = text.find(prefix, p)) != std::string::npos) {
    if (p == 0 || text[p - 1] == '\n') {
      size_t e = text.find('\n', p);
      std::string line = text.substr(p, e - p);
      return std::stod(line.substr(line.rfind(' ') + 1));
    }
    p += prefix.size();
  }
  return -1;
}

}  // namespace tarmac::testing
