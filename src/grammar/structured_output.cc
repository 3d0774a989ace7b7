#include "grammar/structured_output.h"

#include "grammar/gbnf_parser.h"
#include "grammar/regex_parser.h"

namespace tarmac::grammar {

Result<Grammar> GrammarFromChoices(const std::vector<std::string>& choices) {
  if (choices.empty()) return InvalidArgument("choice: the list is empty");
  std::vector<Expr> alts;
  for (size_t i = 0; i < choices.size(); ++i) {
    // An empty output cannot be told apart from a model that stops at once.
    if (choices[i].empty()) return InvalidArgument("choice[{}]: empty strings are not allowed", i);
    alts.push_back(Literal(choices[i]));
  }
  Grammar g;
  const int32_t root = g.AddRule("root");
  g.SetBody(root, Choice(std::move(alts)));
  g.SetRoot(root);
  return g;
}

Result<Grammar> BuildGrammar(const StructuredOutputSpec& spec) {
  switch (spec.kind) {
    case StructuredOutputKind::kJsonObject:
      return JsonObjectGrammar(spec.json);
    case StructuredOutputKind::kJsonSchema:
      return GrammarFromJsonSchemaText(spec.text, spec.json);
    case StructuredOutputKind::kRegex:
      return GrammarFromRegex(spec.text);
    case StructuredOutputKind::kChoice:
      return GrammarFromChoices(spec.choices);
    case StructuredOutputKind::kGbnf:
      return ParseGbnf(spec.text);
  }
  return InvalidArgument("structured output: unknown kind");
}

}  // namespace tarmac::grammar
