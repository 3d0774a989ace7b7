#include "router/pool_model.h"

#include <ctime>

namespace tarmac::router {
namespace {

std::string TokenText(const tok::Tokenizer& t, int32_t id) {
  if (id < 0 || id >= t.n_vocab()) return "";
  return t.TokenToPiece(id, /*render_special=*/true);
}

}  // namespace

Result<std::unique_ptr<PoolModel>> PoolModel::Create(std::string name, model::LlamaModel* model,
                                                     const tok::Tokenizer* tokenizer, engine::EngineConfig config,
                                                     bool check_integrity) {
  auto m = std::make_unique<PoolModel>();
  m->name = std::move(name);
  m->model = model;
  m->tokenizer = tokenizer;
  const tok::Vocab& v = tokenizer->vocab();
  auto chat = ChatFormatter::Create(v.chat_template, TokenText(*tokenizer, v.bos_id), TokenText(*tokenizer, v.eos_id));
  if (!chat.ok()) return Status(chat.status().code(), m->name + ": chat template: " + chat.status().message());
  m->chat = std::move(chat).value();
  config.model_name = m->name;
  TARMAC_ASSIGN_OR_RETURN(m->engine, engine::EngineClient::Create(model, tokenizer, config));
  if (check_integrity) m->engine->set_check_integrity(true);
  m->max_context = m->engine->config().sched.max_context;
  m->created = static_cast<int64_t>(std::time(nullptr));
  return m;
}

}  // namespace tarmac::router
