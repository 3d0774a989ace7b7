// PoolModel: one model of the pool: the name requests give in `model`, the borrowed weights
// and tokenizer, the engine that runs it (owned), its chat formatter (the model's GGUF chat
// template, or the plain default), its context and load time.
//
// Thread-safety: immutable after Create except through the engine, which is thread-safe.
// Preconditions: the model and tokenizer outlive the PoolModel.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "engine/engine_client.h"
#include "router/chat_format.h"

namespace tarmac::router {

struct PoolModel {
  std::string name;
  const model::LlamaModel* model = nullptr;
  const tok::Tokenizer* tokenizer = nullptr;
  std::unique_ptr<engine::EngineClient> engine;
  ChatFormatter chat;
  int32_t max_context = 0;
  int64_t created = 0;  // unix seconds when loaded

  // Starts the engine (config.model_name becomes `name`). check_integrity: test aid, see
  // EngineClient::set_check_integrity. Errors name the model and what failed.
  static Result<std::unique_ptr<PoolModel>> Create(std::string name, model::LlamaModel* model,
                                                   const tok::Tokenizer* tokenizer,
                                                   engine::EngineConfig config, bool check_integrity = false);
};

}  // namespace tarmac::router
