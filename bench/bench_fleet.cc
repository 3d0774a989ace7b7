// bench_fleet: a fleet of `tarmac serve` replicas on loopback driven open-loop (Poisson
// arrivals) with a shared-system-prompt workload, each request sent where a policy says:
// round robin, or the stand-in for llm-d's endpoint picker (fleet/picker.h: precise prefix
// scorer fed by the replicas' real KV events, queue and KV-utilisation scorers fed by their
// vllm: metrics). bench/fleet_bench.sh starts the replicas and compares the policies.
//
// Workload: --prompts system prompts of --prompt-tokens token ids each (cut from the corpus,
// tokenized by replica 0), Zipf(--zipf) over them (or --hot F: prompt 0 takes F of the traffic,
// Zipf over the rest), each followed by a suffix of --suffix-min..--suffix-max token ids from the
// corpus; --max-tokens generated. Prints one JSON object: TTFT percentiles, the prefix-cache hit
// rate (cached / prompt tokens, from each response's usage), requests per replica, each
// replica's time-averaged outstanding requests, and its engine queue (vllm:num_requests_waiting
// scraped every 50 ms: mean and max; the replicas need --metrics-names vllm).
#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <mutex>
#include <random>
#include <sstream>
#include <thread>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "base/clock.h"
#include "fleet/http_client.h"
#include "fleet/picker.h"

namespace tarmac::bench {
namespace {

using Json = nlohmann::json;

struct Args {
  std::vector<std::string> replicas;  // PORT,EVENTS,REPLAY
  std::string policy = "precise";
  int requests = 300;
  double rate = 8;
  double zipf = 1.0;
  double hot = 0;
  int prompts = 16, prompt_tokens = 384, suffix_min = 32, suffix_max = 120, max_tokens = 8, block_size = 16;
  std::string corpus;
  uint64_t seed = 1;
  PickerWeights weights;
};

struct Request {
  double at = 0;  // seconds after the start
  int prompt = 0;
  std::vector<int32_t> ids;
};

struct Outcome {
  int replica = -1, status = 0;
  double ttft = 0, e2e = 0;
  int64_t prompt_tokens = 0, cached_tokens = 0;
};

// The replica's (first) model: every replica serves the same one.
std::string ModelName(int port) {
  HttpReply m = HttpRequest(port, "GET", "/v1/models");
  return Json::parse(m.body)["data"][0]["id"];
}

std::vector<int32_t> Tokenize(int port, const std::string& model, const std::string& text) {
  HttpReply r = HttpRequest(port, "POST", "/tokenize", Json{{"model", model}, {"prompt", text}}.dump());
  return Json::parse(r.body)["tokens"].get<std::vector<int32_t>>();
}

// The system prompts and a pool of suffix tokens, cut from the corpus at spread offsets.
std::vector<Request> MakeWorkload(const Args& a, int port, const std::string& model) {
  std::ifstream f(a.corpus);
  std::stringstream ss;
  ss << f.rdbuf();
  const std::string text = ss.str();
  if (text.size() < 200000) {
    std::fprintf(stderr, "bench_fleet: --corpus '%s' is missing or too short\n", a.corpus.c_str());
    std::exit(2);
  }
  const size_t stride = text.size() / static_cast<size_t>(a.prompts + 2);
  std::vector<std::vector<int32_t>> systems;
  for (int p = 0; p < a.prompts; ++p) {
    std::vector<int32_t> ids = Tokenize(port, model, text.substr(stride * static_cast<size_t>(p), 4 * static_cast<size_t>(a.prompt_tokens)));
    ids.resize(static_cast<size_t>(a.prompt_tokens));
    systems.push_back(std::move(ids));
  }
  const std::vector<int32_t> pool = Tokenize(port, model, text.substr(stride * static_cast<size_t>(a.prompts), 40000));
  std::mt19937_64 rng(a.seed);
  std::vector<double> w;
  for (int p = 0; p < a.prompts; ++p) w.push_back(1.0 / std::pow(p + 1, a.zipf));
  std::discrete_distribution<int> zipf(w.begin(), w.end());
  std::discrete_distribution<int> rest(w.begin() + 1, w.end());
  std::exponential_distribution<double> gap(a.rate);
  std::uniform_int_distribution<int> len(a.suffix_min, a.suffix_max);
  std::vector<Request> out;
  double t = 0;
  for (int i = 0; i < a.requests; ++i) {
    Request r;
    t += gap(rng);
    r.at = t;
    if (a.hot > 0) {
      r.prompt = std::uniform_real_distribution<double>(0, 1)(rng) < a.hot ? 0 : 1 + rest(rng);
    } else {
      r.prompt = zipf(rng);
    }
    r.ids = systems[static_cast<size_t>(r.prompt)];
    const int n = len(rng);
    const size_t at = std::uniform_int_distribution<size_t>(0, pool.size() - static_cast<size_t>(n))(rng);
    r.ids.insert(r.ids.end(), pool.begin() + static_cast<std::ptrdiff_t>(at), pool.begin() + static_cast<std::ptrdiff_t>(at) + n);
    out.push_back(std::move(r));
  }
  return out;
}

double Percentile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const double pos = q * static_cast<double>(v.size() - 1);
  const size_t lo = static_cast<size_t>(pos);
  const double frac = pos - static_cast<double>(lo);
  return lo + 1 < v.size() ? v[lo] * (1 - frac) + v[lo + 1] * frac : v[lo];
}

int Run(const Args& a) {
  std::vector<ReplicaAddress> replicas;
  for (const std::string& spec : a.replicas) {
    ReplicaAddress r;
    std::stringstream in(spec);
    std::string port;
    std::getline(in, port, ',');
    std::getline(in, r.events, ',');
    std::getline(in, r.replay, ',');
    r.http_port = std::atoi(port.c_str());
    if (r.http_port <= 0 || (a.policy == "precise" && (r.events.empty() || r.replay.empty()))) {
      std::fprintf(stderr, "bench_fleet: --replica '%s': expected PORT,EVENTS_ENDPOINT,REPLAY_ENDPOINT\n", spec.c_str());
      return 2;
    }
    replicas.push_back(r);
  }
  const std::string model = ModelName(replicas[0].http_port);
  const std::vector<Request> work = MakeWorkload(a, replicas[0].http_port, model);
  std::unique_ptr<StandInPicker> picker;
  if (a.policy == "precise") {
    picker = std::make_unique<StandInPicker>(replicas, a.weights, a.block_size, a.seed);
    if (Status st = picker->Start(); !st.ok()) {
      std::fprintf(stderr, "bench_fleet: %s\n", st.message().c_str());
      return 1;
    }
  }
  const size_t n = replicas.size();
  std::vector<std::atomic<int>> outstanding(n);
  std::vector<double> queue_sum(n, 0);
  int64_t samples = 0;
  std::atomic<bool> done{false};
  std::thread sampler([&] {
    while (!done) {
      for (size_t r = 0; r < n; ++r) queue_sum[r] += outstanding[r].load();
      ++samples;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  });
  // The engines' own queues, as the picker reads them: vllm:num_requests_waiting every 50 ms.
  std::vector<double> waiting_sum(n, 0), waiting_max(n, 0);
  int64_t scrapes = 0;
  std::thread scraper([&] {
    while (!done) {
      for (size_t r = 0; r < n; ++r) {
        const double w = FirstSample(HttpRequest(replicas[r].http_port, "GET", "/metrics").body, "vllm:num_requests_waiting");
        waiting_sum[r] += std::max(w, 0.0);
        waiting_max[r] = std::max(waiting_max[r], w);
      }
      ++scrapes;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  });
  std::vector<Outcome> outcomes(work.size());
  std::vector<std::thread> workers;
  std::atomic<size_t> rr{0};
  const double t0 = NowSeconds();
  for (size_t i = 0; i < work.size(); ++i) {
    const double wait = t0 + work[i].at - NowSeconds();
    if (wait > 0) std::this_thread::sleep_for(std::chrono::duration<double>(wait));
    workers.emplace_back([&, i] {
      const Request& q = work[i];
      Outcome& o = outcomes[i];
      const double start = NowSeconds();
      const Json body = {{"model", model}, {"prompt", q.ids}, {"max_tokens", a.max_tokens}, {"ignore_eos", true},
                         {"stream", true}, {"stream_options", {{"include_usage", true}}}};
      if (picker) {
        // Like the picker: the prompt's token ids from a render endpoint, then the scores.
        HttpReply ids = HttpRequest(replicas[i % n].http_port, "POST", "/v1/completions/render",
                                    Json{{"model", model}, {"prompt", q.ids}}.dump());
        o.replica = picker->Pick(Json::parse(ids.body)["token_ids"].get<std::vector<int32_t>>());
      } else {
        o.replica = static_cast<int>(rr++ % n);
      }
      ++outstanding[static_cast<size_t>(o.replica)];
      HttpReply r = HttpRequest(replicas[static_cast<size_t>(o.replica)].http_port, "POST", "/v1/completions", body.dump());
      --outstanding[static_cast<size_t>(o.replica)];
      o.status = r.status;
      o.ttft = r.first_event_s > 0 ? r.first_event_s - start : 0;
      o.e2e = NowSeconds() - start;
      // The usage chunk: the last data event before [DONE].
      const size_t u = r.body.rfind("\"usage\":");
      if (u != std::string::npos) {
        const size_t s = r.body.rfind("data: ", u) + 6;
        Json last = Json::parse(r.body.substr(s, r.body.find("\n", s) - s), nullptr, false);
        if (last.is_object() && last["usage"].is_object()) {
          o.prompt_tokens = last["usage"]["prompt_tokens"];
          o.cached_tokens = last["usage"]["prompt_tokens_details"]["cached_tokens"];
        }
      }
    });
  }
  for (std::thread& t : workers) t.join();
  const double wall = NowSeconds() - t0;
  done = true;
  sampler.join();
  scraper.join();

  std::vector<double> ttft, e2e;
  int64_t prompt = 0, cached = 0, failed = 0;
  std::vector<int64_t> per(n, 0);
  for (const Outcome& o : outcomes) {
    if (o.status != 200 || o.ttft <= 0) {
      ++failed;
      continue;
    }
    ttft.push_back(o.ttft * 1000);
    e2e.push_back(o.e2e * 1000);
    prompt += o.prompt_tokens;
    cached += o.cached_tokens;
    ++per[static_cast<size_t>(o.replica)];
  }
  const int64_t served = static_cast<int64_t>(work.size()) - failed;
  const int64_t busiest = *std::max_element(per.begin(), per.end());
  Json queues = Json::array();
  double mean = 0, max = 0;
  for (size_t r = 0; r < n; ++r) {
    const double avg = samples ? queue_sum[r] / static_cast<double>(samples) : 0;
    queues.push_back(avg);
    mean += avg / static_cast<double>(n);
    max = std::max(max, avg);
  }
  Json mean_waiting = Json::array();
  for (size_t r = 0; r < n; ++r) mean_waiting.push_back(scrapes ? waiting_sum[r] / static_cast<double>(scrapes) : 0);
  Json out = {{"policy", a.policy},
              {"replicas", n},
              {"requests", work.size()},
              {"failed", failed},
              {"rate", a.rate},
              {"hot", a.hot},
              {"wall_s", wall},
              {"ttft_ms", {{"p50", Percentile(ttft, 0.5)}, {"p90", Percentile(ttft, 0.9)}, {"p99", Percentile(ttft, 0.99)}}},
              {"e2e_ms", {{"p50", Percentile(e2e, 0.5)}, {"p90", Percentile(e2e, 0.9)}}},
              {"prefix_hit_rate", prompt ? static_cast<double>(cached) / static_cast<double>(prompt) : 0},
              {"requests_per_replica", per},
              {"busiest_replica_share", served ? static_cast<double>(busiest) / static_cast<double>(served) : 0},
              {"mean_outstanding", queues},
              {"max_over_mean_outstanding", mean > 0 ? max / mean : 0},
              {"mean_waiting", mean_waiting},
              {"max_waiting", waiting_max}};
  if (picker) {
    const StandInPicker::Stats s = picker->stats();
    out["picker"] = {{"messages", s.messages}, {"lost", s.lost}, {"gaps_filled", s.gaps}, {"index_keys", s.keys}};
  }
  std::printf("%s\n", out.dump().c_str());
  return failed == 0 ? 0 : 1;
}

}  // namespace
}  // namespace tarmac::bench

int main(int argc, char** argv) {
  tarmac::bench::Args a;
  CLI::App app{"fleet benchmark: replicas on loopback under round robin or the stand-in llm-d picker"};
  app.add_option("--replica", a.replicas, "PORT,EVENTS_ENDPOINT,REPLAY_ENDPOINT of one replica (repeat)")->required();
  app.add_option("--policy", a.policy)->check(CLI::IsMember({"precise", "round-robin"}))->capture_default_str();
  app.add_option("--requests", a.requests)->check(CLI::Range(1, 100000))->capture_default_str();
  app.add_option("--rate", a.rate, "Poisson arrivals per second")->check(CLI::Range(0.01, 1e4))->capture_default_str();
  app.add_option("--zipf", a.zipf)->check(CLI::Range(0.0, 10.0))->capture_default_str();
  app.add_option("--hot", a.hot, "share of prompt 0 (0: plain Zipf)")->check(CLI::Range(0.0, 1.0))->capture_default_str();
  app.add_option("--prompts", a.prompts)->check(CLI::Range(1, 1024))->capture_default_str();
  app.add_option("--prompt-tokens", a.prompt_tokens)->check(CLI::Range(1, 100000))->capture_default_str();
  app.add_option("--suffix-min", a.suffix_min)->check(CLI::Range(1, 100000))->capture_default_str();
  app.add_option("--suffix-max", a.suffix_max)->check(CLI::Range(1, 100000))->capture_default_str();
  app.add_option("--max-tokens", a.max_tokens)->check(CLI::Range(1, 100000))->capture_default_str();
  app.add_option("--block-size", a.block_size, "the replicas' KV block size")->check(CLI::Range(1, 1024))->capture_default_str();
  app.add_option("--corpus", a.corpus, "text the prompts are cut from")->required();
  app.add_option("--seed", a.seed)->capture_default_str();
  app.add_option("--w-prefix", a.weights.prefix)->capture_default_str();
  app.add_option("--w-queue", a.weights.queue)->capture_default_str();
  app.add_option("--w-kv", a.weights.kv)->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  if (a.suffix_min > a.suffix_max) {
    std::fprintf(stderr, "bench_fleet: --suffix-min is above --suffix-max\n");
    return 2;
  }
  return tarmac::bench::Run(a);
}
