// The `serve` flags that make a replica pickable by llm-d's endpoint picker (scale-out under
// Kubernetes, deploy/): the KV-event publisher (--kv-events, --kv-events-connect,
// --kv-events-replay, --kv-events-format, --kv-events-topic, --kv-events-replay-buffer) and the
// metric names the picker scrapes (--metrics-names, --metrics-model). Checked once, before any
// model loads; errors name the flag.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "base/status.h"
#include "kvevents/publisher.h"
#include "metrics/registry.h"

namespace tarmac::apps {

struct ScaleOutFlags {
  std::string kv_events, kv_events_connect, kv_events_replay;
  std::string kv_events_format = "array";
  std::string kv_events_topic = "kv@{host}:{port}@{model}";
  int kv_events_replay_buffer = 10000;
  std::string metrics_names = "tarmac";
  std::string metrics_model;
};

void AddScaleOutFlags(CLI::App* cmd, ScaleOutFlags* f);

// The model whose load the vllm: series describe ("" with --metrics-names tarmac). Errors: a
// model named there is not served, or several are served and none is named.
Result<std::string> VllmMetricsModel(const ScaleOutFlags& f, const std::vector<std::string>& models);

// The topic of one model's events: the template with {host}, {port} and {model} filled in (a
// wildcard host such as 0.0.0.0 becomes the machine's hostname). Errors: another {name}, or an
// unclosed brace.
Result<std::string> KvEventTopic(const std::string& tmpl, const std::string& host, int port, const std::string& model);

// The publisher the flags ask for (null when --kv-events and --kv-events-connect are not given).
Result<std::unique_ptr<kvevents::Publisher>> StartKvEvents(const ScaleOutFlags& f,
                                                           std::shared_ptr<metrics::Registry> registry);

}  // namespace tarmac::apps
