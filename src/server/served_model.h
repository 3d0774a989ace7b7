// ServedModel: one model the server serves: its name (the `model` field of requests), the
// borrowed weights and tokenizer, the engine that runs it (owned), and its chat formatter.
//
// Thread-safety: immutable after Create except through the engine, which is thread-safe.
// Preconditions: the model and tokenizer outlive the ServedModel.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "engine/engine_client.h"
#include "server/chat_format.h"

namespace tarmac::server {

struct ServedModel {
  std::string name;
  const model::LlamaModel* model = nullptr;
  const tok::Tokenizer* tokenizer = nullptr;
  std::unique_ptr<engine::EngineClient> engine;
  ChatFormatter chat;
  int32_t max_context = 0;
  int64_t created = 0;  // unix seconds when loaded

  // Starts the engine; the chat template comes from the model's GGUF metadata (plain default
  // when it has none). check_integrity: test aid, see EngineClient::set_check_integrity.
  static Result<std::unique_ptr<ServedModel>> Create(std::string name, model::LlamaModel* model,
                                                     const tok::Tokenizer* tokenizer,
                                                     const engine::EngineConfig& config,
                                                     bool check_integrity = false);
};

}  // namespace tarmac::server
