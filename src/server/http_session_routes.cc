// Session's routes that answer at once, without a generation: models, tokenize/detokenize,
// readiness, render, feedback. See server_internal.h.
#include "server/server_internal.h"

namespace tarmac::server {

using Json = nlohmann::ordered_json;

void Session::HandleModels(const std::string& one) {
  auto card = [](const router::PoolModel& m) {
    return Json{{"id", m.name}, {"object", "model"}, {"created", m.created}, {"owned_by", "tarmac"},
                {"root", m.name}, {"max_model_len", m.max_context}};
  };
  if (!one.empty()) {
    if (srv_->IsRoute(one)) {
      Respond(200, "application/json", DumpJson(Json{{"id", one}, {"object", "model"}, {"created", 0}, {"owned_by", "tarmac"},
                                                     {"root", one}, {"tarmac", {{"route", true}}}}));
      return;
    }
    const router::PoolModel* m = srv_->FindModel(one);
    if (!m) return RespondError(NotFound("The model '" + one + "' does not exist", "model", "model_not_found"));
    Respond(200, "application/json", DumpJson(card(*m)));
    return;
  }
  Json data = Json::array();
  for (const auto& m : srv_->pool().models()) data.push_back(card(*m));
  if (srv_->router()) {
    for (const std::string& r : srv_->router()->route_names())
      data.push_back(Json{{"id", r}, {"object", "model"}, {"created", 0}, {"owned_by", "tarmac"}, {"root", r},
                          {"tarmac", {{"route", true}}}});
  }
  Respond(200, "application/json", DumpJson(Json{{"object", "list"}, {"data", std::move(data)}}));
}

void Session::HandleTokenize(bool detokenize) {
  const std::string& body = parser_->get().body();
  if (detokenize) {
    DetokenizeRequest r;
    if (auto e = ParseDetokenizeRequest(body, &r)) return RespondError(*e);
    const router::PoolModel* m = srv_->FindModel(r.model);
    if (!m) return RespondError(NotFound("The model '" + r.model + "' does not exist", "model", "model_not_found"));
    for (size_t i = 0; i < r.tokens.size(); ++i) {
      if (r.tokens[i] < 0 || r.tokens[i] >= m->tokenizer->n_vocab())
        return RespondError(BadRequest("tokens", fmt::format("token {} at index {} is outside the vocabulary (0..{})",
                                                             r.tokens[i], i, m->tokenizer->n_vocab() - 1), "invalid_value"));
    }
    Respond(200, "application/json", DumpJson(Json{{"prompt", m->tokenizer->Decode(r.tokens)}}));
    return;
  }
  auto r = std::make_shared<TokenizeRequest>();
  if (auto e = ParseTokenizeRequest(body, r.get())) return RespondError(*e);
  const router::PoolModel* m = srv_->FindModel(r->model);
  if (!m) return RespondError(NotFound("The model '" + r->model + "' does not exist", "model", "model_not_found"));
  // Off the I/O thread (session_prepare.cc), as a generation's prompt is.
  OffIoThread([m, r, parse_special = r->parse_special.value_or(srv_->config().parse_special)]() -> Then {
    std::vector<int32_t> ids;
    if (r->is_chat) {
      auto enc = m->chat.Encode(r->messages, nullptr, r->add_generation_prompt, *m->tokenizer);
      if (!enc.ok())
        return [e = BadRequest("messages", "the chat template rejected the messages: " + enc.status().message())](Session* s) {
          s->RespondError(e);
        };
      ids = std::move(enc).value();
    } else {
      ids = m->tokenizer->Encode(r->prompt, tok::EncodeOptions{r->add_special_tokens, parse_special});
    }
    std::string out = DumpJson(Json{{"count", ids.size()}, {"max_model_len", m->max_context}, {"tokens", ids}});
    return [out = std::move(out)](Session* s) { s->Respond(200, "application/json", out); };
  }, CheapToPrepare(false));
}

void Session::HandleReady() {
  // Ready: every model loaded and warmed up (SetReady comes after both), each engine taking
  // requests, and not draining. Never needs a key, like /health.
  if (srv_->draining) return RespondError(Unavailable("the server is draining"));
  if (!srv_->ready) return RespondError(Unavailable("the server is loading models"));
  Json models = Json::object();
  for (const auto& m : srv_->pool().models()) {
    if (const std::string why = m->engine->failure(); !why.empty())
      return RespondError(Unavailable("model '" + m->name + "' is unhealthy: its engine failed (" + why + ")"));
    if (!m->engine->accepting()) return RespondError(Unavailable("model '" + m->name + "' is not accepting requests"));
    models[m->name] = "ready";
  }
  Respond(200, "application/json", DumpJson(Json{{"status", "ready"}, {"models", std::move(models)}}));
}

void Session::HandleRender(ApiKind kind, const std::string& tenant) {
  // The same parsing, template, tokenizer and checks as the generation request, then the
  // prompt's token ids instead of a generation.
  GenRequest req;
  if (auto e = ParseGenRequest(parser_->get().body(), kind, &req)) return RespondError(*e);
  req.spec.tenant = tenant;
  if (srv_->IsRoute(req.model))
    return RespondError(BadRequest("model", "'" + req.model + "' is a route, and a route picks its model per request: "
                                            "render with one of the models it routes to"));
  const router::PoolModel* m = srv_->FindModel(req.model);
  if (!m) return RespondError(NotFound("The model '" + req.model + "' does not exist", "model", "model_not_found"));
  if (kind == ApiKind::kCompletion && req.spec.prompts.size() != 1)
    return RespondError(BadRequest("prompt", fmt::format("render takes one prompt, got {}", req.spec.prompts.size())));
  // Off the I/O thread (session_prepare.cc): a huge prompt or a costly grammar stalls no one.
  auto spec = std::make_shared<const router::GenerationSpec>(std::move(req.spec));
  OffIoThread([m, spec]() -> Then {
    auto prepared = router::Prepare(*m, *spec);
    if (!prepared.ok()) return [e = FromStatus(prepared.status())](Session* s) { s->RespondError(e); };
    std::string body = DumpJson(Json{{"token_ids", prepared->requests.front().request().prompt}});
    return [body = std::move(body)](Session* s) { s->Respond(200, "application/json", body); };
  }, CheapToPrepare(spec->constrained()));
}

void Session::HandleFeedback(const std::string& tenant) {
  FeedbackRequest r;
  if (auto e = ParseFeedbackRequest(parser_->get().body(), &r)) return RespondError(*e);
  if (!srv_->router()) return RespondError(NotFound("no routed response with id '" + r.id + "' (this server has no routes)", "id"));
  Status st = srv_->router()->Feedback(r.id, tenant, r.score);
  if (st.code() == StatusCode::kNotFound) return RespondError(NotFound(st.message(), "id"));
  if (!st.ok()) return RespondError(FromStatus(st));
  Respond(200, "application/json", "{\"status\":\"ok\"}");
}

}  // namespace tarmac::server
