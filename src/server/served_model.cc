#include "server/served_model.h"

#include <ctime>

namespace tarmac::server {
namespace {

std::string TokenText(const tok::Tokenizer& t, int32_t id) {
  if (id < 0 || id >= t.n_vocab()) return "";
  return t.TokenToPiece(id, /*render_special=*/true);
}

}  // namespace

Result<std::unique_ptr<ServedModel>> ServedModel::Create(std::string name, model::LlamaModel* model,
                                                         const tok::Tokenizer* tokenizer,
                                                         const engine::EngineConfig& config,
                                                         bool check_integrity) {
  auto m = std::make_unique<ServedModel>();
  m->name = std::move(name);
  m->model = model;
  m->tokenizer = tokenizer;
  std::string source;
  if (auto t = model->file().GetString("tokenizer.chat_template"); t.ok()) source = *t;
  auto chat = ChatFormatter::Create(source, TokenText(*tokenizer, tokenizer->vocab().bos_id),
                                    TokenText(*tokenizer, tokenizer->vocab().eos_id));
  if (!chat.ok()) return Status(chat.status().code(), m->name + ": chat template: " + chat.status().message());
  m->chat = std::move(chat).value();
  TARMAC_ASSIGN_OR_RETURN(m->engine, engine::EngineClient::Create(model, tokenizer, config));
  if (check_integrity) m->engine->set_check_integrity(true);
  m->max_context = m->engine->config().max_context;
  m->created = static_cast<int64_t>(std::time(nullptr));
  return m;
}

}  // namespace tarmac::server
