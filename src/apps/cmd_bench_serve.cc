// `tarmac bench serve`: drives a running server (ours or any OpenAI-compatible one) with a
// built-in workload over streaming HTTP, closed loop (--concurrency N) or open loop (--rate R,
// Poisson arrivals, optionally capped by --concurrency), and reports like `vllm bench serve`:
// request and token throughput, TTFT, TPOT, ITL and end-to-end latency (mean, median, p95,
// p99) and goodput under the given SLOs; --json for one JSON object. --scrape-metrics MS also
// times GET /metrics every MS ms while the load runs (what a scheduler's scraper sees).
//
// Workloads (deterministic for a --seed; sized for a 512-token context):
//   short-chat            chat, one short user message, 64 output tokens
//   long-document         completion over a ~250-word document + "Summary:", 64 output tokens
//   shared-system-prompt  chat, the same ~150-word system prompt + a short question, 48 tokens
//   multi-turn            chat, conversations of 4 turns (turn k carries the k earlier turns)
// Each request uses its own connection (Connection: close) and stream_options.include_usage.
#include <netdb.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <mutex>
#include <random>
#include <thread>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "apps/percentiles.h"
#include "apps/bench_serve.h"

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
  bool json = false;
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

// Scrapes /metrics every `period_ms` until *stop, recording each response's latency (seconds)
// and the failures (non-200 or no answer).
void ScrapeMetrics(const Args& a, const Target& t, const std::atomic<bool>* stop, std::vector<double>* latency,
                   int* failures) {
  auto next = Clock::now();
  while (!stop->load()) {
    const auto t0 = Clock::now();
    auto [status, body] = Get(a, t, "/metrics", a.timeout_s);
    latency->push_back(std::chrono::duration<double>(Clock::now() - t0).count());
    if (status != 200 || body.empty()) ++*failures;
    next += std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(a.scrape_ms / 1e3));
    std::this_thread::sleep_until(next);
  }
}

int RunBenchServe(Args a) {
  Target t;
  if (!ParseUrl(a.url, &t)) {
    std::fprintf(stderr, "tarmac bench serve: --url '%s': expected http://HOST:PORT\n", a.url.c_str());
    return 2;
  }
  if (a.concurrency <= 0 && a.rate <= 0) a.concurrency = 1;
  if (a.model.empty()) a.model = DiscoverModel(a, t);
  if (a.model.empty()) {
    std::fprintf(stderr, "tarmac bench serve: cannot list models at %s (is the server running? pass --model)\n", a.url.c_str());
    return 1;
  }
  std::vector<Outcome> out(a.requests);
  std::atomic<int> next{0};
  std::atomic<bool> stop_scraping{false};
  std::vector<double> scrape;
  int scrape_failures = 0;
  std::thread scraper;
  if (a.scrape_ms > 0) scraper = std::thread(ScrapeMetrics, std::cref(a), std::cref(t), &stop_scraping, &scrape, &scrape_failures);
  const auto start = Clock::now();
  auto worker = [&] {
    for (int i; (i = next++) < a.requests;) {
      auto [path, body] = MakeRequest(a, i);
      out[i] = RunOne(a, t, path, body);
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
        out[i] = RunOne(a, t, path, body);
        inflight--;
      });
    }
  } else {
    for (int w = 0; w < a.concurrency; ++w) th.emplace_back(worker);
  }
  for (auto& x : th) x.join();
  const double dur = std::chrono::duration<double>(Clock::now() - start).count();
  stop_scraping = true;
  if (scraper.joinable()) scraper.join();
  const Percentiles st_scrape = Summarize(scrape);
  const double scrape_max = scrape.empty() ? 0 : *std::max_element(scrape.begin(), scrape.end());

  std::vector<double> ttft, tpot, itl, e2e;
  int ok = 0, good = 0;
  int64_t in_tok = 0, out_tok = 0;
  std::string first_error;
  for (const Outcome& o : out) {
    if (!o.ok) {
      if (first_error.empty()) first_error = o.error;
      continue;
    }
    ok++;
    in_tok += o.prompt_tokens;
    out_tok += o.output_tokens;
    ttft.push_back(o.ttft);
    e2e.push_back(o.e2e);
    const double tp = o.output_tokens > 1 ? (o.e2e - o.ttft) / (o.output_tokens - 1) : 0;
    if (o.output_tokens > 1) tpot.push_back(tp);
    itl.insert(itl.end(), o.itl.begin(), o.itl.end());
    if ((a.slo_ttft_ms <= 0 || o.ttft * 1e3 <= a.slo_ttft_ms) && (a.slo_tpot_ms <= 0 || tp * 1e3 <= a.slo_tpot_ms) &&
        (a.slo_e2e_ms <= 0 || o.e2e * 1e3 <= a.slo_e2e_ms))
      good++;
  }
  const Percentiles st_ttft = Summarize(ttft), st_tpot = Summarize(tpot), st_itl = Summarize(itl), st_e2e = Summarize(e2e);
  auto ms = [](const Percentiles& s) { return Json{{"mean", s.mean * 1e3}, {"median", s.p50 * 1e3}, {"p95", s.p95 * 1e3}, {"p99", s.p99 * 1e3}}; };
  if (a.json) {
    Json j = {{"url", a.url}, {"model", a.model}, {"workload", a.workload}, {"concurrency", a.concurrency},
              {"rate", a.rate}, {"requests", a.requests}, {"successful_requests", ok}, {"failed_requests", a.requests - ok},
              {"duration_s", dur}, {"total_input_tokens", in_tok}, {"total_output_tokens", out_tok},
              {"request_throughput", ok / dur}, {"output_throughput", out_tok / dur},
              {"total_token_throughput", (in_tok + out_tok) / dur}, {"request_goodput", good / dur},
              {"slo", {{"ttft_ms", a.slo_ttft_ms}, {"tpot_ms", a.slo_tpot_ms}, {"e2e_ms", a.slo_e2e_ms}}},
              {"ttft_ms", ms(st_ttft)}, {"tpot_ms", ms(st_tpot)}, {"itl_ms", ms(st_itl)}, {"e2el_ms", ms(st_e2e)}};
    if (a.scrape_ms > 0) {
      Json m = ms(st_scrape);
      m["max"] = scrape_max * 1e3;
      m["n"] = scrape.size();
      m["failures"] = scrape_failures;
      j["metrics_scrape_ms"] = m;
    }
    if (!first_error.empty()) j["first_error"] = first_error;
    std::printf("%s\n", j.dump().c_str());
  } else {
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
    std::printf("%-40s %s\n", "Load:", a.rate > 0 ? fmt::format("rate {} req/s, max concurrency {}", a.rate, a.concurrency).c_str()
                                                    : fmt::format("concurrency {}", a.concurrency).c_str());
    std::printf("%-40s %-10d\n", "Successful requests:", ok);
    std::printf("%-40s %-10d\n", "Failed requests:", a.requests - ok);
    line("Benchmark duration (s):", dur);
    std::printf("%-40s %-10lld\n", "Total input tokens:", static_cast<long long>(in_tok));
    std::printf("%-40s %-10lld\n", "Total generated tokens:", static_cast<long long>(out_tok));
    line("Request throughput (req/s):", ok / dur);
    line("Request goodput (req/s):", good / dur);
    line("Output token throughput (tok/s):", out_tok / dur);
    line("Total Token throughput (tok/s):", (in_tok + out_tok) / dur);
    sect("---------------Time to First Token----------------", "TTFT", st_ttft);
    sect("-----Time per Output Token (excl. 1st token)------", "TPOT", st_tpot);
    sect("---------------Inter-token Latency----------------", "ITL", st_itl);
    sect("----------------End-to-end Latency----------------", "E2EL", st_e2e);
    if (a.scrape_ms > 0) {
      sect("-------------GET /metrics while loaded-------------", "scrape", st_scrape);
      line("Max scrape (ms):", scrape_max * 1e3);
      std::printf("%-40s %zu (%d failed)\n", "Scrapes:", scrape.size(), scrape_failures);
    }
    std::printf("==================================================\n");
    if (!first_error.empty()) std::printf("first error: %s\n", first_error.c_str());
  }
  return ok == a.requests && scrape_failures == 0 ? 0 : 1;
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
  cmd->add_option("--scrape-metrics", a->scrape_ms,
                  "also GET /metrics every this many ms during the run and report its latency (0: off)")
      ->capture_default_str()->check(CLI::Range(0.0, 1e6));
  cmd->add_flag("--json", a->json, "one JSON object");
  cmd->callback([a, run] { *run = [a] { return RunBenchServe(*a); }; });
}

}  // namespace tarmac::apps
