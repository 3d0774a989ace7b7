#include "apps/serve_scale_out.h"

#include <unistd.h>

#include <algorithm>

namespace tarmac::apps {

void AddScaleOutFlags(CLI::App* cmd, ScaleOutFlags* f) {
  cmd->add_option("--kv-events", f->kv_events,
                  "publish prefix-cache events (vLLM's KV-event format, ZeroMQ PUB) on this bound endpoint, "
                  "e.g. tcp://*:5557");
  cmd->add_option("--kv-events-connect", f->kv_events_connect,
                  "publish KV events by connecting to a subscriber's endpoint instead, e.g. tcp://epp:5557");
  cmd->add_option("--kv-events-replay", f->kv_events_replay,
                  "answer replay requests (ZeroMQ ROUTER) on this endpoint, e.g. tcp://*:5558");
  cmd->add_option("--kv-events-format", f->kv_events_format,
                  "event encoding: array (positional, as llm-d and Dynamo decode it) or map (tagged by \"type\")")
      ->capture_default_str()->check(CLI::IsMember({"array", "map"}));
  cmd->add_option("--kv-events-topic", f->kv_events_topic,
                  "topic of each model's events; {host}, {port} and {model} are filled in")
      ->capture_default_str();
  cmd->add_option("--kv-events-replay-buffer", f->kv_events_replay_buffer, "messages kept for replay")
      ->capture_default_str()->check(CLI::Range(1, 1 << 24));
  cmd->add_option("--metrics-names", f->metrics_names,
                  "tarmac, or vllm: also expose vllm:num_requests_waiting, vllm:num_requests_running, "
                  "vllm:kv_cache_usage_perc and vllm:cache_config_info for one model (what llm-d's endpoint "
                  "picker scrapes)")
      ->capture_default_str()->check(CLI::IsMember({"tarmac", "vllm"}));
  cmd->add_option("--metrics-model", f->metrics_model,
                  "with --metrics-names vllm: the model the vllm: series describe (needed when serving several)");
}

Result<std::string> VllmMetricsModel(const ScaleOutFlags& f, const std::vector<std::string>& models) {
  if (f.metrics_names != "vllm") {
    if (!f.metrics_model.empty()) return InvalidArgument("--metrics-model is only read with --metrics-names vllm");
    return std::string();
  }
  if (!f.metrics_model.empty()) {
    if (std::find(models.begin(), models.end(), f.metrics_model) == models.end())
      return InvalidArgument("--metrics-model '{}': no model of that name is served (names are file stems)",
                             f.metrics_model);
    return f.metrics_model;
  }
  if (models.size() != 1)
    return InvalidArgument("--metrics-names vllm: {} models are served, and the picker reads one series per "
                           "metric; name the one they describe with --metrics-model", models.size());
  return models.front();
}

Result<std::string> KvEventTopic(const std::string& tmpl, const std::string& host, int port, const std::string& model) {
  std::string h = host;
  if (h == "0.0.0.0" || h == "::" || h.empty()) {
    char buf[256] = {0};
    h = ::gethostname(buf, sizeof(buf) - 1) == 0 ? buf : "localhost";
  }
  std::string out;
  for (size_t i = 0; i < tmpl.size(); ++i) {
    if (tmpl[i] != '{') {
      out += tmpl[i];
      continue;
    }
    const size_t close = tmpl.find('}', i);
    if (close == std::string::npos) return InvalidArgument("--kv-events-topic '{}': unclosed '{{'", tmpl);
    const std::string name = tmpl.substr(i + 1, close - i - 1);
    if (name == "host") {
      out += h;
    } else if (name == "port") {
      out += std::to_string(port);
    } else if (name == "model") {
      out += model;
    } else {
      return InvalidArgument("--kv-events-topic '{}': unknown placeholder {{{}}} (use {{host}}, {{port}}, {{model}})",
                             tmpl, name);
    }
    i = close;
  }
  return out;
}

Result<std::unique_ptr<kvevents::Publisher>> StartKvEvents(const ScaleOutFlags& f,
                                                           std::shared_ptr<metrics::Registry> registry) {
  if (f.kv_events.empty() && f.kv_events_connect.empty()) {
    if (!f.kv_events_replay.empty()) return InvalidArgument("--kv-events-replay needs --kv-events or --kv-events-connect");
    return std::unique_ptr<kvevents::Publisher>();
  }
  kvevents::PublisherConfig c;
  c.endpoint = f.kv_events;
  c.connect = f.kv_events_connect;
  c.replay_endpoint = f.kv_events_replay;
  TARMAC_ASSIGN_OR_RETURN(c.format, kvevents::ParseEventFormat(f.kv_events_format));
  c.replay_buffer = static_cast<size_t>(f.kv_events_replay_buffer);
  return kvevents::Publisher::Create(std::move(c), std::move(registry));
}

}  // namespace tarmac::apps
