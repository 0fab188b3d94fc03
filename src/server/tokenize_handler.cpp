// POST /tokenize, /detokenize and /apply-template (vLLM-style helpers).
#include "harmony/render.h"
#include "server/handlers.h"

namespace gossamer::server {

void handle_tokenize(Ctx& ctx, const httplib::Request& req, httplib::Response& res) {
  json body;
  ApiError err;
  if (!json_object_body(req, &body, &err)) return send_error(res, err);
  std::vector<int32_t> ids;
  if (body.contains("messages")) {
    if (!body.contains("model")) body["model"] = ctx.opts.model_name;
    auto p = harmony::render_chat_request(dump(body), *ctx.tok, ctx.opts.render);
    if (!p.ok()) return send_error(res, from_status(p.status()));
    ids = p->ids;
  } else {
    auto it = body.find("prompt");
    if (it == body.end() || !it->is_string()) {
      return send_error(res, bad_request("'prompt' (string) or 'messages' is required", "prompt"));
    }
    bool special = false;
    for (const char* k : {"add_special_tokens", "allow_special"}) {
      auto f = body.find(k);
      if (f == body.end() || f->is_null()) continue;
      if (!f->is_boolean()) {
        return send_error(res, bad_request(std::string("'") + k + "' must be a boolean", k));
      }
      special = special || f->get<bool>();
    }
    ids = ctx.tok->encode(it->get<std::string>(), special);
  }
  res.set_content(
      dump(json{
          {"tokens", ids}, {"count", ids.size()}, {"max_model_len", ctx.engine->max_model_len()}}),
      "application/json");
}

void handle_detokenize(Ctx& ctx, const httplib::Request& req, httplib::Response& res) {
  json body;
  ApiError err;
  if (!json_object_body(req, &body, &err)) return send_error(res, err);
  auto it = body.find("tokens");
  if (it == body.end() || !it->is_array()) {
    return send_error(res, bad_request("'tokens' must be an array of integers", "tokens"));
  }
  std::vector<int32_t> ids;
  for (const auto& t : *it) {
    if (!t.is_number_integer() || t.get<int64_t>() < 0 || t.get<int64_t>() > INT32_MAX) {
      return send_error(res, bad_request("'tokens' must contain non-negative integers", "tokens"));
    }
    ids.push_back(t.get<int32_t>());
  }
  auto text = ctx.tok->decode(ids);
  if (!text.ok()) return send_error(res, bad_request(text.status().message(), "tokens"));
  res.set_content(dump(json{{"prompt", *text}}), "application/json");
}

void handle_apply_template(Ctx& ctx, const httplib::Request& req, httplib::Response& res) {
  json body;
  ApiError err;
  if (!json_object_body(req, &body, &err)) return send_error(res, err);
  auto p = harmony::render_chat_request(dump(body), *ctx.tok, ctx.opts.render);
  if (!p.ok()) return send_error(res, from_status(p.status()));
  res.set_content(dump(json{{"prompt", p->text}, {"tokens", p->ids}}), "application/json");
}

}  // namespace gossamer::server
