#include "grammar/tool_call_grammar.h"

#include <algorithm>

#include "grammar/json_values.h"

namespace tarmac::grammar {

Result<Grammar> ForcedToolCallGrammar(ToolCallFormat format, const std::vector<ToolSpec>& tools,
                                      const ForcedToolCallOptions& options) {
  if (format == ToolCallFormat::kNone)
    return InvalidArgument("tool_choice: forcing a tool call needs a tool-call format, and the model has none");
  if (tools.empty()) return InvalidArgument("tool_choice: forcing a tool call needs 'tools'");
  if (options.function) {
    const bool known = std::any_of(tools.begin(), tools.end(), [&](const ToolSpec& t) { return t.name == *options.function; });
    if (!known) return InvalidArgument("tool_choice: function '{}' is not in 'tools'", *options.function);
  }
  Grammar g;
  const int32_t root = g.AddRule("root");
  // One rule per allowed tool: its call object.
  const char* args_key = format == ToolCallFormat::kLlama3Json ? "parameters" : "arguments";
  std::vector<Expr> calls;
  for (size_t i = 0; i < tools.size(); ++i) {
    const ToolSpec& tool = tools[i];
    if (options.function && tool.name != *options.function) continue;
    if (tool.name.empty()) return InvalidArgument("tools[{}].function.name: must not be empty", i);
    JsonSchemaOptions json = options.json;
    json.path = fmt::format("tools[{}].function.parameters", i);
    const nlohmann::ordered_json params =
        tool.parameters.is_null() ? nlohmann::ordered_json{{"type", "object"}} : tool.parameters;
    TARMAC_ASSIGN_OR_RETURN(Expr args, AddJsonSchema(params, json, fmt::format("tool{}", i), &g));
    const int32_t rule = g.AddRule(fmt::format("call-{}", tool.name));
    g.SetBody(rule, Sequence({Literal("{\"name\": "), JsonLiteral(nlohmann::ordered_json(tool.name)),
                              Literal(fmt::format(", \"{}\": ", args_key)), std::move(args), Literal("}")}));
    calls.push_back(RuleRef(rule));
  }
  Expr call = Choice(std::move(calls));
  const int32_t more = options.parallel ? Expr::kUnbounded : 0;
  switch (format) {
    case ToolCallFormat::kHermes: {
      Expr block = Sequence({Literal("<tool_call>\n"), call, Literal("\n</tool_call>")});
      g.SetBody(root, Sequence({block, Repeat(Sequence({Literal("\n"), block}), 0, more)}));
      break;
    }
    case ToolCallFormat::kLlama3Json:
      g.SetBody(root, Sequence({call, Repeat(Sequence({Literal("; "), call}), 0, more)}));
      break;
    case ToolCallFormat::kMistral:
      g.SetBody(root, Sequence({Literal("["), call, Repeat(Sequence({Literal(", "), call}), 0, more), Literal("]")}));
      break;
    case ToolCallFormat::kNone:
      break;
  }
  g.SetRoot(root);
  return g;
}

}  // namespace tarmac::grammar
