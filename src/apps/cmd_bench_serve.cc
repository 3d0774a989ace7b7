// `tarmac bench serve`: drives a running server (ours or any OpenAI-compatible one) with a
// built-in workload over streaming HTTP, closed loop (--concurrency N) or open loop (--rate R,
// Poisson arrivals, optionally capped by --concurrency), and reports like `vllm bench serve`:
// request and token throughput, TTFT, TPOT, ITL and end-to-end latency (mean, median, p95,
// p99) and goodput under the given SLOs; --json for one JSON object. --scrape-metrics MS also
// times GET /metrics every MS ms while the load runs (what a scheduler's scraper sees).
// --sweep 1,2,4,... runs each concurrency in turn and prints the throughput-latency curve and
// the goodput as one table; --plot DIR writes figures (plots.h).
//
// Workloads (deterministic for a --seed; sized for a 512-token context):
//   short-chat            chat, one short user message, 64 output tokens
//   long-document         completion over a ~250-word document + "Summary:", 64 output tokens
//   shared-system-prompt  chat, the same ~150-word system prompt + a short question, 48 tokens
//   multi-turn            chat, conversations of 4 turns (turn k carries the k earlier turns)
// Requests are seeded (deterministic); --distinct N repeats the first N, --cache asks tarmac to
// cache every response (so repeats are response-cache hits).
// Each request uses its own connection (Connection: close) and stream_options.include_usage.
#include <netdb.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <mutex>
#include <random>
#include <thread>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "apps/percentiles.h"
#include "apps/bench_serve.h"
#include "apps/plots.h"
#include "base/progress.h"

namespace tarmac::apps {
namespace {

using Json = nlohmann::json;
using Clock = std::chrono::steady_clock;

struct Args {
  std::string url = "http://127.0.0.1:8080";
  std::string model;
  std::string api_key;
  std::string workload = "short-chat";
  int concurrency = 0;
  double rate = 0;
  int requests = 100;
  int max_tokens = 0;  // 0: the workload's
  uint64_t seed = 1;
  double slo_ttft_ms = 0, slo_tpot_ms = 0, slo_e2e_ms = 0;
  double timeout_s = 300;
  double scrape_ms = 0;  // > 0: GET /metrics this often during the run, timing each
  int distinct = 0;      // > 0: request i repeats request i % distinct (cache hits)
  bool cache = false;    // ask the server to cache every response (tarmac's `cache`)
  bool json = false;
  std::vector<int> sweep;  // --sweep: concurrency levels, run in turn
  std::string plot_dir;    // --plot: PNG figures here
};

struct Outcome {
  bool ok = false;
  std::string error;
  int prompt_tokens = 0, output_tokens = 0;
  double ttft = 0, e2e = 0;
  std::vector<double> itl;
};

const char* kWords[] = {"prince", "andrew", "natasha", "pierre", "moscow", "army", "count", "princess", "mary",
                        "the", "of", "and", "to", "in", "his", "her", "war", "peace", "old", "said", "with",
                        "French", "emperor", "battle", "ball", "house", "letter", "father", "face", "eyes",
                        "smile", "looked", "went", "was", "that", "at", "room", "officer", "regiment", "Rostov",
                        "Bolkonsky", "Napoleon", "Kutuzov", "winter", "snow", "field", "horse", "love", "life"};

std::string Words(std::mt19937_64& rng, int n) {
  std::string s;
  for (int i = 0; i < n; ++i) {
    if (i) s += (i % 12 == 11) ? ". " : " ";
    s += kWords[rng() % (sizeof(kWords) / sizeof(kWords[0]))];
  }
  return s + ".";
}

// (path, body) of request i.
std::pair<std::string, Json> MakeRequest(const Args& a, int i) {
  if (a.distinct > 0) i %= a.distinct;
  std::mt19937_64 rng(a.seed * 1000003 + static_cast<uint64_t>(i));
  Json b = {{"model", a.model}, {"stream", true}, {"stream_options", {{"include_usage", true}}}, {"temperature", 0.8},
            {"seed", static_cast<int64_t>(a.seed + i)}, {"ignore_eos", true}};
  std::string path = "/v1/chat/completions";
  int mt = 64;
  if (a.workload == "short-chat") {
    b["messages"] = {{{"role", "user"}, {"content", Words(rng, 8 + static_cast<int>(rng() % 20))}}};
  } else if (a.workload == "long-document") {
    path = "/v1/completions";
    b["prompt"] = Words(rng, 250) + "\n\nSummary:";
  } else if (a.workload == "shared-system-prompt") {
    std::mt19937_64 fixed(a.seed);
    b["messages"] = {{{"role", "system"}, {"content", Words(fixed, 150)}},
                     {{"role", "user"}, {"content", Words(rng, 6 + static_cast<int>(rng() % 10))}}};
    mt = 48;
  } else {  // multi-turn
    const int conv = i / 4, turn = i % 4;
    std::mt19937_64 crng(a.seed * 7919 + static_cast<uint64_t>(conv));
    Json msgs = Json::array();
    for (int t = 0; t <= turn; ++t) {
      msgs.push_back({{"role", "user"}, {"content", Words(crng, 15)}});
      if (t < turn) msgs.push_back({{"role", "assistant"}, {"content", Words(crng, 30)}});
    }
    b["messages"] = msgs;
    mt = 32;
  }
  b["max_tokens"] = a.max_tokens > 0 ? a.max_tokens : mt;
  if (a.cache) b["cache"] = true;
  return {path, b};
}

struct Target {
  std::string host, port;
};

bool ParseUrl(const std::string& url, Target* t) {
  std::string u = url;
  if (u.rfind("http://", 0) == 0) u = u.substr(7);
  else if (u.find("://") != std::string::npos) return false;
  if (auto s = u.find('/'); s != std::string::npos) u.resize(s);
  auto c = u.rfind(':');
  t->host = c == std::string::npos ? u : u.substr(0, c);
  t->port = c == std::string::npos ? "80" : u.substr(c + 1);
  return !t->host.empty();
}

int Dial(const Target& t, double timeout_s) {
  addrinfo hints{}, *res = nullptr;
  hints.ai_socktype = SOCK_STREAM;
  if (getaddrinfo(t.host.c_str(), t.port.c_str(), &hints, &res) != 0) return -1;
  int fd = -1;
  for (addrinfo* p = res; p; p = p->ai_next) {
    fd = ::socket(p->ai_family, p->ai_socktype, p->ai_protocol);
    if (fd < 0) continue;
    if (::connect(fd, p->ai_addr, p->ai_addrlen) == 0) break;
    ::close(fd);
    fd = -1;
  }
  freeaddrinfo(res);
  if (fd >= 0) {
    timeval tv{static_cast<time_t>(timeout_s), 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  }
  return fd;
}

Outcome RunOne(const Args& a, const Target& t, const std::string& path, const Json& body) {
  Outcome o;
  const std::string b = body.dump();
  std::string req = "POST " + path + " HTTP/1.1\r\nHost: " + t.host + "\r\nConnection: close\r\nContent-Type: application/json\r\n";
  if (!a.api_key.empty()) req += "Authorization: Bearer " + a.api_key + "\r\n";
  req += "Content-Length: " + std::to_string(b.size()) + "\r\n\r\n" + b;
  const auto t0 = Clock::now();
  int fd = Dial(t, a.timeout_s);
  if (fd < 0) {
    o.error = "cannot connect";
    return o;
  }
  for (size_t off = 0; off < req.size();) {
    ssize_t n = ::send(fd, req.data() + off, req.size() - off, MSG_NOSIGNAL);
    if (n <= 0) break;
    off += static_cast<size_t>(n);
  }
  std::string raw;
  size_t scan = 0;
  bool first = true, done = false;
  double last = 0;
  char buf[16384];
  int status = 0;
  while (!done) {
    ssize_t n = ::recv(fd, buf, sizeof(buf), 0);
    if (n <= 0) break;
    const double now = std::chrono::duration<double>(Clock::now() - t0).count();
    raw.append(buf, static_cast<size_t>(n));
    if (status == 0 && raw.size() >= 12) status = std::atoi(raw.c_str() + 9);
    size_t p;
    while ((p = raw.find("data: ", scan)) != std::string::npos) {
      size_t e = raw.find("\n\n", p);
      if (e == std::string::npos) break;
      std::string d = raw.substr(p + 6, e - p - 6);
      scan = e + 2;
      if (d == "[DONE]") {
        done = true;
        break;
      }
      Json j = Json::parse(d, nullptr, false);
      if (j.is_discarded()) continue;
      if (j.contains("error")) o.error = j["error"].value("message", "error");
      if (j.contains("usage") && j["usage"].is_object()) {
        o.prompt_tokens = j["usage"].value("prompt_tokens", 0);
        o.output_tokens = j["usage"].value("completion_tokens", 0);
      }
      bool has_text = false;
      if (j.contains("choices"))
        for (const Json& c : j["choices"]) {
          if (c.contains("text") && c["text"].is_string() && !c["text"].get<std::string>().empty()) has_text = true;
          if (c.contains("delta") && c["delta"].contains("content") && c["delta"]["content"].is_string() &&
              !c["delta"]["content"].get<std::string>().empty())
            has_text = true;
        }
      if (has_text) {
        if (first) {
          o.ttft = now;
          first = false;
        } else {
          o.itl.push_back(now - last);
        }
        last = now;
      }
    }
  }
  ::close(fd);
  o.e2e = std::chrono::duration<double>(Clock::now() - t0).count();
  if (status != 200) {
    auto e = raw.find("\r\n\r\n");
    o.error = "HTTP " + std::to_string(status) + (e == std::string::npos ? "" : ": " + raw.substr(e + 4, 200));
  } else if (!done && o.error.empty()) {
    o.error = "stream ended without [DONE]";
  }
  o.ok = o.error.empty() && !first;
  if (!o.ok && o.error.empty()) o.error = "no tokens";
  return o;
}


// GET `path` on a connection of its own: (status, body); status 0 when it failed.
std::pair<int, std::string> Get(const Args& a, const Target& t, const std::string& path, double timeout_s) {
  int fd = Dial(t, timeout_s);
  if (fd < 0) return {0, ""};
  std::string req = "GET " + path + " HTTP/1.1\r\nHost: " + t.host + "\r\nConnection: close\r\n";
  if (!a.api_key.empty()) req += "Authorization: Bearer " + a.api_key + "\r\n";
  req += "\r\n";
  (void)!::send(fd, req.data(), req.size(), MSG_NOSIGNAL);
  std::string raw;
  char buf[16384];
  ssize_t n;
  while ((n = ::recv(fd, buf, sizeof(buf), 0)) > 0) raw.append(buf, static_cast<size_t>(n));
  ::close(fd);
  auto e = raw.find("\r\n\r\n");
  if (raw.size() < 12 || e == std::string::npos) return {0, ""};
  return {std::atoi(raw.c_str() + 9), raw.substr(e + 4)};
}

std::string DiscoverModel(const Args& a, const Target& t) {
  auto [status, body] = Get(a, t, "/v1/models", 10);
  if (status != 200) return "";
  Json j = Json::parse(body, nullptr, false);
  if (j.is_discarded() || !j.contains("data") || j["data"].empty()) return "";
  return j["data"][0].value("id", "");
}

// One sample of the server's state while the load runs (from /metrics): seconds since the
// run started, the largest KV usage over the models (0..1) and the requests running.
struct StateSample {
  double t = 0, kv_usage = 0, running = 0;
};

// The value of every sample of `name` (any labels) in a Prometheus text body, with its labels.
std::vector<std::pair<std::string, double>> Samples(const std::string& body, const std::string& name) {
  std::vector<std::pair<std::string, double>> out;
  size_t p = 0;
  while ((p = body.find(name, p)) != std::string::npos) {
    const bool line_start = p == 0 || body[p - 1] == '\n';
    const size_t after = p + name.size();
    p = after;
    if (!line_start || after >= body.size() || (body[after] != '{' && body[after] != ' ')) continue;
    size_t e = body.find('\n', after);
    if (e == std::string::npos) e = body.size();
    const std::string line = body.substr(after, e - after);
    std::string labels;
    size_t v = 0;
    if (line[0] == '{') {
      const size_t close = line.rfind('}');
      if (close == std::string::npos) continue;
      labels = line.substr(1, close - 1);
      v = close + 1;
    }
    out.emplace_back(labels, std::strtod(line.c_str() + v, nullptr));
  }
  return out;
}

// The value of label `key` in a rendered label list (k1="v1",k2="v2").
std::string Label(const std::string& labels, const std::string& key) {
  const std::string k = key + "=\"";
  size_t p = 0;
  while ((p = labels.find(k, p)) != std::string::npos) {
    if (p == 0 || labels[p - 1] == ',') {
      const size_t e = labels.find('"', p + k.size());
      return labels.substr(p + k.size(), e - p - k.size());
    }
    p += k.size();
  }
  return "";
}

// Scrapes /metrics every `period_ms` until *stop: records each response's latency (seconds)
// and the failures (non-200 or no answer), and (state != null) the KV usage and running requests.
void ScrapeMetrics(const Args& a, const Target& t, double period_ms, Clock::time_point start, const std::atomic<bool>* stop,
                   std::vector<double>* latency, int* failures, std::vector<StateSample>* state) {
  auto next = Clock::now();
  while (!stop->load()) {
    const auto t0 = Clock::now();
    auto [status, body] = Get(a, t, "/metrics", a.timeout_s);
    latency->push_back(std::chrono::duration<double>(Clock::now() - t0).count());
    if (status != 200 || body.empty()) ++*failures;
    if (state && status == 200) {
      StateSample s;
      s.t = std::chrono::duration<double>(t0 - start).count();
      for (const auto& [l, v] : Samples(body, "tarmac:kv_cache_usage_perc")) s.kv_usage = std::max(s.kv_usage, v);
      for (const auto& [l, v] : Samples(body, "tarmac:num_requests_running")) s.running += v;
      state->push_back(s);
    }
    next += std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(period_ms / 1e3));
    std::this_thread::sleep_until(next);
  }
}

// One run at one load: the requests' outcomes and what the scraper saw.
struct RunResult {
  int concurrency = 0;
  std::vector<Outcome> out;
  double dur = 0;
  std::vector<double> scrape;  // --scrape-metrics latencies
  int scrape_failures = 0;
  std::vector<StateSample> state;  // --plot: the server's KV usage and running requests
  // Summaries.
  int ok = 0, good = 0;
  int64_t in_tok = 0, out_tok = 0;
  std::vector<double> ttft, tpot, itl, e2e;
  Percentiles st_ttft, st_tpot, st_itl, st_e2e, st_scrape;
  double scrape_max = 0;
  std::string first_error;
};

constexpr double kStateSampleMs = 250;  // --plot without --scrape-metrics: the server's state this often

RunResult RunLoad(const Args& a, const Target& t, Progress* progress) {
  RunResult r;
  r.concurrency = a.concurrency;
  r.out.resize(a.requests);
  std::atomic<int> next{0};
  std::atomic<bool> stop_scraping{false};
  std::thread scraper;
  const auto start = Clock::now();
  const bool sample_state = !a.plot_dir.empty();
  std::vector<double> state_latency;  // the state sampler's own latencies (not reported)
  int state_failures = 0;
  std::thread sampler;
  if (a.scrape_ms > 0)
    scraper = std::thread(ScrapeMetrics, std::cref(a), std::cref(t), a.scrape_ms, start, &stop_scraping, &r.scrape,
                          &r.scrape_failures, sample_state ? &r.state : nullptr);
  else if (sample_state)
    sampler = std::thread(ScrapeMetrics, std::cref(a), std::cref(t), kStateSampleMs, start, &stop_scraping, &state_latency,
                          &state_failures, &r.state);
  auto worker = [&] {
    for (int i; (i = next++) < a.requests;) {
      auto [path, body] = MakeRequest(a, i);
      r.out[i] = RunOne(a, t, path, body);
      progress->Add(1);
    }
  };
  std::vector<std::thread> th;
  // Outlives the request threads, which are joined below (it was declared inside the branch
  // and went out of scope while they still decremented it: ASan, stack-use-after-scope).
  std::atomic<int> inflight{0};
  if (a.rate > 0) {
    // Open loop: Poisson arrivals; at most --concurrency in flight when given.
    std::mt19937_64 rng(a.seed);
    std::exponential_distribution<double> gap(a.rate);
    double at = 0;
    for (int i = 0; i < a.requests; ++i) {
      at += gap(rng);
      std::this_thread::sleep_until(start + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(at)));
      while (a.concurrency > 0 && inflight.load() >= a.concurrency) std::this_thread::sleep_for(std::chrono::milliseconds(1));
      inflight++;
      th.emplace_back([&, i] {
        auto [path, body] = MakeRequest(a, i);
        r.out[i] = RunOne(a, t, path, body);
        progress->Add(1);
        inflight--;
      });
    }
  } else {
    for (int w = 0; w < a.concurrency; ++w) th.emplace_back(worker);
  }
  for (auto& x : th) x.join();
  r.dur = std::chrono::duration<double>(Clock::now() - start).count();
  stop_scraping = true;
  if (scraper.joinable()) scraper.join();
  if (sampler.joinable()) sampler.join();
  r.st_scrape = Summarize(r.scrape);
  r.scrape_max = r.scrape.empty() ? 0 : *std::max_element(r.scrape.begin(), r.scrape.end());
  for (const Outcome& o : r.out) {
    if (!o.ok) {
      if (r.first_error.empty()) r.first_error = o.error;
      continue;
    }
    r.ok++;
    r.in_tok += o.prompt_tokens;
    r.out_tok += o.output_tokens;
    r.ttft.push_back(o.ttft);
    r.e2e.push_back(o.e2e);
    const double tp = o.output_tokens > 1 ? (o.e2e - o.ttft) / (o.output_tokens - 1) : 0;
    if (o.output_tokens > 1) r.tpot.push_back(tp);
    r.itl.insert(r.itl.end(), o.itl.begin(), o.itl.end());
    if ((a.slo_ttft_ms <= 0 || o.ttft * 1e3 <= a.slo_ttft_ms) && (a.slo_tpot_ms <= 0 || tp * 1e3 <= a.slo_tpot_ms) &&
        (a.slo_e2e_ms <= 0 || o.e2e * 1e3 <= a.slo_e2e_ms))
      r.good++;
  }
  r.st_ttft = Summarize(r.ttft);
  r.st_tpot = Summarize(r.tpot);
  r.st_itl = Summarize(r.itl);
  r.st_e2e = Summarize(r.e2e);
  return r;
}

Json Ms(const Percentiles& s) { return Json{{"mean", s.mean * 1e3}, {"median", s.p50 * 1e3}, {"p95", s.p95 * 1e3}, {"p99", s.p99 * 1e3}}; }

Json RunJson(const Args& a, const RunResult& r) {
  Json j = {{"url", a.url}, {"model", a.model}, {"workload", a.workload}, {"concurrency", r.concurrency},
            {"rate", a.rate}, {"requests", a.requests}, {"successful_requests", r.ok}, {"failed_requests", a.requests - r.ok},
            {"duration_s", r.dur}, {"total_input_tokens", r.in_tok}, {"total_output_tokens", r.out_tok},
            {"request_throughput", r.ok / r.dur}, {"output_throughput", r.out_tok / r.dur},
            {"total_token_throughput", (r.in_tok + r.out_tok) / r.dur}, {"request_goodput", r.good / r.dur},
            {"slo", {{"ttft_ms", a.slo_ttft_ms}, {"tpot_ms", a.slo_tpot_ms}, {"e2e_ms", a.slo_e2e_ms}}},
            {"ttft_ms", Ms(r.st_ttft)}, {"tpot_ms", Ms(r.st_tpot)}, {"itl_ms", Ms(r.st_itl)}, {"e2el_ms", Ms(r.st_e2e)}};
  if (a.scrape_ms > 0) {
    Json m = Ms(r.st_scrape);
    m["max"] = r.scrape_max * 1e3;
    m["n"] = r.scrape.size();
    m["failures"] = r.scrape_failures;
    j["metrics_scrape_ms"] = m;
  }
  if (!r.first_error.empty()) j["first_error"] = r.first_error;
  return j;
}

void PrintRun(const Args& a, const RunResult& r) {
  auto line = [](const char* k, double v) { std::printf("%-40s %-10.2f\n", k, v); };
  auto sect = [&](const char* title, const char* tag, const Percentiles& s) {
    std::printf("%s\n", title);
    std::printf("%-40s %-10.2f\n", fmt::format("Mean {} (ms):", tag).c_str(), s.mean * 1e3);
    std::printf("%-40s %-10.2f\n", fmt::format("Median {} (ms):", tag).c_str(), s.p50 * 1e3);
    std::printf("%-40s %-10.2f\n", fmt::format("P95 {} (ms):", tag).c_str(), s.p95 * 1e3);
    std::printf("%-40s %-10.2f\n", fmt::format("P99 {} (ms):", tag).c_str(), s.p99 * 1e3);
  };
  std::printf("============ Serving Benchmark Result ============\n");
  std::printf("%-40s %s\n", "Workload:", a.workload.c_str());
  std::printf("%-40s %s\n", "Load:", a.rate > 0 ? fmt::format("rate {} req/s, max concurrency {}", a.rate, r.concurrency).c_str()
                                                  : fmt::format("concurrency {}", r.concurrency).c_str());
  std::printf("%-40s %-10d\n", "Successful requests:", r.ok);
  std::printf("%-40s %-10d\n", "Failed requests:", a.requests - r.ok);
  line("Benchmark duration (s):", r.dur);
  std::printf("%-40s %-10lld\n", "Total input tokens:", static_cast<long long>(r.in_tok));
  std::printf("%-40s %-10lld\n", "Total generated tokens:", static_cast<long long>(r.out_tok));
  line("Request throughput (req/s):", r.ok / r.dur);
  line("Request goodput (req/s):", r.good / r.dur);
  line("Output token throughput (tok/s):", r.out_tok / r.dur);
  line("Total Token throughput (tok/s):", (r.in_tok + r.out_tok) / r.dur);
  sect("---------------Time to First Token----------------", "TTFT", r.st_ttft);
  sect("-----Time per Output Token (excl. 1st token)------", "TPOT", r.st_tpot);
  sect("---------------Inter-token Latency----------------", "ITL", r.st_itl);
  sect("----------------End-to-end Latency----------------", "E2EL", r.st_e2e);
  if (a.scrape_ms > 0) {
    sect("-------------GET /metrics while loaded-------------", "scrape", r.st_scrape);
    line("Max scrape (ms):", r.scrape_max * 1e3);
    std::printf("%-40s %zu (%d failed)\n", "Scrapes:", r.scrape.size(), r.scrape_failures);
  }
  std::printf("==================================================\n");
  if (!r.first_error.empty()) std::printf("first error: %s\n", r.first_error.c_str());
}

// The throughput-latency curve of a sweep, one row per concurrency.
void PrintSweep(const Args& a, const std::vector<RunResult>& runs) {
  std::printf("============ Load sweep: %s, %d requests per level ============\n", a.workload.c_str(), a.requests);
  std::string slo = "none";
  if (a.slo_ttft_ms > 0 || a.slo_tpot_ms > 0 || a.slo_e2e_ms > 0)
    slo = fmt::format("TTFT {} ms, TPOT {} ms, E2E {} ms (0: no bound)", a.slo_ttft_ms, a.slo_tpot_ms, a.slo_e2e_ms);
  std::printf("goodput SLO: %s\n", slo.c_str());
  std::printf("%11s %6s %9s %11s %9s %10s %10s %10s %10s %10s %10s\n", "concurrency", "failed", "req/s", "out tok/s",
              "goodput", "TTFT p50", "TTFT p99", "TPOT p50", "TPOT p99", "E2E p50", "E2E p99");
  for (const RunResult& r : runs)
    std::printf("%11d %6d %9.2f %11.1f %9.2f %10.1f %10.1f %10.2f %10.2f %10.1f %10.1f\n", r.concurrency, a.requests - r.ok,
                r.ok / r.dur, r.out_tok / r.dur, r.good / r.dur, r.st_ttft.p50 * 1e3, r.st_ttft.p99 * 1e3,
                r.st_tpot.p50 * 1e3, r.st_tpot.p99 * 1e3, r.st_e2e.p50 * 1e3, r.st_e2e.p99 * 1e3);
  std::printf("(latencies in ms; goodput: requests per second within the SLO)\n");
}

// The figures of a run or a sweep (see plots.h). Returns false when one failed to render.
bool WritePlots(const Args& a, const Target& t, const std::vector<RunResult>& runs) {
  auto plotter = Plotter::Create(a.plot_dir);
  if (!plotter.ok()) {
    std::fprintf(stderr, "tarmac bench serve: %s\n", plotter.status().message().c_str());
    return false;
  }
  const Plotter& p = plotter.value();
  if (!p.available())
    std::fprintf(stderr, "tarmac bench serve: gnuplot not found: skipping the PNG figures (the .dat and .gp files are in %s; "
                         "scripts/install-deps.sh installs gnuplot-nox)\n", a.plot_dir.c_str());
  std::vector<PlotSpec> specs;
  const std::string what = fmt::format("{} on {}", a.workload, a.model);
  auto level = [&](const RunResult& r) {
    return a.rate > 0 ? fmt::format("rate {}/s", a.rate) : fmt::format("concurrency {}", r.concurrency);
  };
  PlotSpec ttft{"ttft_cdf", "TTFT distribution: " + what, "time to first token (ms)", "fraction of requests"};
  PlotSpec tpot{"tpot_cdf", "TPOT distribution: " + what, "time per output token (ms)", "fraction of requests"};
  PlotSpec kv{"kv_usage", "KV cache usage over time: " + what, "seconds since the level started", "KV usage (%)"};
  kv.y2label = "requests running";
  ttft.style = tpot.style = "steps";
  kv.style = "lines";
  for (const RunResult& r : runs) {
    ttft.series.push_back({level(r), Plotter::Cdf(r.ttft, 1e3)});
    tpot.series.push_back({level(r), Plotter::Cdf(r.tpot, 1e3)});
    PlotSeries use{"KV usage, " + level(r)}, running{"running, " + level(r)};
    running.y2 = true;
    for (const StateSample& s : r.state) {
      use.points.emplace_back(s.t, 100 * s.kv_usage);
      running.points.emplace_back(s.t, s.running);
    }
    kv.series.push_back(std::move(use));
    kv.series.push_back(std::move(running));
  }
  specs.push_back(ttft);
  specs.push_back(tpot);
  specs.push_back(kv);
  if (runs.size() > 1) {
    PlotSpec sw{"sweep", "Load sweep: " + what, "concurrency", "tokens/s"};
    sw.logx = true;
    sw.y2label = "latency (ms)";
    PlotSeries thr{"output tok/s"}, good{"goodput (req/s x 100)"}, ttft99{"TTFT p99 (ms)"}, tpot99{"TPOT p99 (ms)"},
        tpot50{"TPOT p50 (ms)"};
    ttft99.y2 = tpot99.y2 = tpot50.y2 = true;
    for (const RunResult& r : runs) {
      thr.points.emplace_back(r.concurrency, r.out_tok / r.dur);
      good.points.emplace_back(r.concurrency, 100 * r.good / r.dur);
      ttft99.points.emplace_back(r.concurrency, r.st_ttft.p99 * 1e3);
      tpot99.points.emplace_back(r.concurrency, r.st_tpot.p99 * 1e3);
      tpot50.points.emplace_back(r.concurrency, r.st_tpot.p50 * 1e3);
    }
    sw.series = {thr, good, ttft99, tpot50, tpot99};
    specs.push_back(sw);
  }
  // Speculation per bucket: the server's counters (since it started) after the run.
  auto [status, body] = Get(a, t, "/metrics", a.timeout_s);
  std::map<std::string, std::pair<double, double>> spec;  // bucket -> (drafted, accepted)
  if (status == 200) {
    auto name = [](const std::string& l) {
      return fmt::format("{} T={} out={}", Label(l, "task"), Label(l, "temperature_band"), Label(l, "output_band"));
    };
    for (const auto& [l, v] : Samples(body, "tarmac:spec_decode_num_draft_tokens_total")) spec[name(l)].first += v;
    for (const auto& [l, v] : Samples(body, "tarmac:spec_decode_num_accepted_tokens_total")) spec[name(l)].second += v;
  }
  PlotSpec acc{"spec_acceptance", "Draft acceptance per request bucket (server counters since start)", "bucket",
               "accepted / drafted tokens"};
  acc.style = "boxes";
  PlotSeries rate{"acceptance rate"};
  for (const auto& [bucket, c] : spec) {
    if (c.first <= 0) continue;
    rate.points.emplace_back(static_cast<double>(acc.xtics.size()), c.second / c.first);
    acc.xtics.push_back(bucket);
  }
  if (rate.points.empty()) {
    std::fprintf(stderr, "tarmac bench serve: no drafted tokens in %s/metrics (speculation off?): no spec_acceptance figure\n",
                 a.url.c_str());
  } else {
    acc.series.push_back(rate);
    specs.push_back(acc);
  }
  bool ok = true;
  for (const PlotSpec& s : specs) {
    if (Status st = p.Plot(s); !st.ok()) {
      std::fprintf(stderr, "tarmac bench serve: %s\n", st.message().c_str());
      ok = false;
    } else if (p.available()) {
      std::fprintf(stderr, "tarmac bench serve: wrote %s/%s.png\n", a.plot_dir.c_str(), s.name.c_str());
    }
  }
  return ok;
}

int RunBenchServe(Args a) {
  Target t;
  if (!ParseUrl(a.url, &t)) {
    std::fprintf(stderr, "tarmac bench serve: --url '%s': expected http://HOST:PORT\n", a.url.c_str());
    return 2;
  }
  if (!a.sweep.empty() && a.rate > 0) {
    std::fprintf(stderr, "tarmac bench serve: --sweep runs closed-loop concurrency levels; it cannot be combined with --rate\n");
    return 2;
  }
  if (!a.sweep.empty() && a.concurrency > 0) {
    std::fprintf(stderr, "tarmac bench serve: --sweep gives the concurrency levels; drop --concurrency\n");
    return 2;
  }
  if (a.concurrency <= 0 && a.rate <= 0) a.concurrency = 1;
  if (a.model.empty()) a.model = DiscoverModel(a, t);
  if (a.model.empty()) {
    std::fprintf(stderr, "tarmac bench serve: cannot list models at %s (is the server running? pass --model)\n", a.url.c_str());
    return 1;
  }
  std::vector<RunResult> runs;
  if (a.sweep.empty()) {
    Progress progress("bench serve", a.requests, Progress::Unit::kItems, "requests");
    runs.push_back(RunLoad(a, t, &progress));
  } else {
    for (size_t i = 0; i < a.sweep.size(); ++i) {
      Args level = a;
      level.concurrency = a.sweep[i];
      Progress progress(fmt::format("bench serve: sweep {}/{}, concurrency {}", i + 1, a.sweep.size(), level.concurrency),
                        a.requests, Progress::Unit::kItems, "requests");
      runs.push_back(RunLoad(level, t, &progress));
    }
  }
  if (a.json) {
    if (a.sweep.empty()) {
      std::printf("%s\n", RunJson(a, runs[0]).dump().c_str());
    } else {
      Json levels = Json::array();
      for (const RunResult& r : runs) levels.push_back(RunJson(a, r));
      std::printf("%s\n", Json{{"sweep", a.sweep}, {"levels", levels}}.dump().c_str());
    }
  } else if (a.sweep.empty()) {
    PrintRun(a, runs[0]);
  } else {
    PrintSweep(a, runs);
  }
  bool plots_ok = true;
  if (!a.plot_dir.empty()) plots_ok = WritePlots(a, t, runs);
  bool all_ok = plots_ok;
  for (const RunResult& r : runs) all_ok = all_ok && r.ok == a.requests && r.scrape_failures == 0;
  return all_ok ? 0 : 1;
}

}  // namespace

void RegisterBenchServe(CLI::App* bench, RunFn* run) {
  auto a = std::make_shared<Args>();
  auto* cmd = bench->add_subcommand("serve", "load generator against a running OpenAI-compatible server");
  cmd->add_option("--url", a->url, "server base URL (http://HOST:PORT)")->capture_default_str();
  cmd->add_option("--model", a->model, "model id (default: the first of /v1/models)");
  cmd->add_option("--api-key", a->api_key, "sent as 'Authorization: Bearer KEY'");
  cmd->add_option("--workload", a->workload, "short-chat | long-document | shared-system-prompt | multi-turn")
      ->capture_default_str()->check(CLI::IsMember({"short-chat", "long-document", "shared-system-prompt", "multi-turn"}));
  cmd->add_option("-c,--concurrency", a->concurrency, "closed loop: requests in flight (with --rate: the cap)")
      ->check(CLI::Range(1, 100000));
  cmd->add_option("--rate", a->rate, "open loop: Poisson arrivals per second")->check(CLI::Range(0.0, 1e6));
  cmd->add_option("-n,--requests", a->requests, "requests to send")->capture_default_str()->check(CLI::Range(1, 10000000));
  cmd->add_option("--max-tokens", a->max_tokens, "output tokens per request (0: the workload's)")->capture_default_str()
      ->check(CLI::Range(0, 1 << 20));
  cmd->add_option("--seed", a->seed, "workload and arrival seed")->capture_default_str();
  cmd->add_option("--slo-ttft-ms", a->slo_ttft_ms, "goodput SLO on TTFT (0: none)")->check(CLI::Range(0.0, 1e9));
  cmd->add_option("--slo-tpot-ms", a->slo_tpot_ms, "goodput SLO on TPOT (0: none)")->check(CLI::Range(0.0, 1e9));
  cmd->add_option("--slo-e2e-ms", a->slo_e2e_ms, "goodput SLO on end-to-end latency (0: none)")->check(CLI::Range(0.0, 1e9));
  cmd->add_option("--timeout", a->timeout_s, "seconds to wait for each response")->capture_default_str()->check(CLI::Range(1.0, 1e6));
  cmd->add_option("--distinct", a->distinct, "request i repeats request i mod N (0: all distinct)")
      ->capture_default_str()->check(CLI::Range(0, 10000000));
  cmd->add_flag("--cache", a->cache, "ask the server to cache every response (tarmac's 'cache': true)");
  cmd->add_option("--scrape-metrics", a->scrape_ms,
                  "also GET /metrics every this many ms during the run and report its latency (0: off)")
      ->capture_default_str()->check(CLI::Range(0.0, 1e6));
  cmd->add_option("--sweep", a->sweep,
                  "load sweep: run each closed-loop concurrency in turn (--requests each), e.g. 1,2,4,8,16,32,64, and "
                  "report the throughput-latency curve and goodput in one table (and one figure with --plot)")
      ->delimiter(',')->check(CLI::Range(1, 100000));
  cmd->add_option("--plot", a->plot_dir,
                  "write PNG figures (gnuplot) to this directory: TTFT and TPOT distributions, KV usage over time, "
                  "draft acceptance per bucket, the sweep's curve");
  cmd->add_flag("--json", a->json, "one JSON object");
  cmd->callback([a, run] { *run = [a] { return RunBenchServe(*a); }; });
}

}  // namespace tarmac::apps
