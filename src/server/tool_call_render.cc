#include "server/tool_call_render.h"

#include <map>

namespace tarmac::server {
namespace {

using Json = nlohmann::ordered_json;

grammar::ToolCallParserOptions Options(const router::ToolUse& use, const std::string& id_prefix) {
  grammar::ToolCallParserOptions o;
  o.forced = use.forced();
  o.make_id = [id_prefix](int32_t index) { return id_prefix + std::to_string(index); };
  return o;
}

}  // namespace

ToolCallRender::ToolCallRender(grammar::ToolCallFormat format, const router::ToolUse& use, const std::string& id_prefix)
    : parser_(format, Options(use, id_prefix)), parallel_(use.parallel) {}

ToolCallRender::Delta ToolCallRender::Feed(std::string_view text, bool last) {
  grammar::ToolCallEvents ev = parser_.Feed(text);
  if (last) {
    grammar::ToolCallEvents tail = parser_.Finish();
    ev.content += tail.content;
    ev.tool_calls.insert(ev.tool_calls.end(), tail.tool_calls.begin(), tail.tool_calls.end());
  }
  if (!parallel_) std::erase_if(ev.tool_calls, [](const grammar::ToolCallDelta& d) { return d.index > 0; });
  grammar::AccumulateToolCallEvents(ev, &parsed_);
  Delta out;
  out.content = std::move(ev.content);
  if (ev.tool_calls.empty()) return out;
  // One entry per call: its first delta opens it (id, type, name), fragments append.
  std::map<int32_t, Json> by_index;
  for (const grammar::ToolCallDelta& d : ev.tool_calls) {
    auto [it, fresh] = by_index.try_emplace(d.index, Json{{"index", d.index}});
    Json& e = it->second;
    if (!d.id.empty()) {
      e["id"] = d.id;
      e["type"] = "function";
      e["function"] = Json{{"name", d.name}};
    }
    Json& f = e["function"];
    if (f.is_null()) f = Json::object();
    f["arguments"] = f.value("arguments", std::string()) + d.arguments;
  }
  out.tool_calls = Json::array();
  for (auto& [index, e] : by_index) out.tool_calls.push_back(std::move(e));
  return out;
}

Json ToolCallRender::MessageToolCalls() const {
  Json calls = Json::array();
  for (const grammar::ToolCall& c : parsed_.tool_calls)
    calls.push_back(Json{{"id", c.id}, {"type", "function"}, {"function", Json{{"name", c.name}, {"arguments", c.arguments}}}});
  return calls;
}

}  // namespace tarmac::server
