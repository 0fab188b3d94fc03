// `gossamer apply-template`: render an OpenAI chat request to harmony token ids, or (--parse)
// run the streaming harmony parser over generated token ids.
//
//   gossamer apply-template --tokenizer tokenizer.json [--date 2025-06-28] < request.json
//     -> line 1: the token ids (space separated), then the prompt text
//   ... --jsonl : one request JSON per stdin line -> one {"ids":[...],"text":...} (or
//                 {"error":...}) JSON object per stdout line, in a single process
//   ... --parse : stdin holds token ids (whitespace separated; with --jsonl one JSON array per
//                 line) -> {"events":[...],"result":{...}} per completion
#include <CLI/CLI.hpp>
#include <cstdio>
#include <iostream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "cli/commands.h"
#include "common/file_util.h"
#include "common/json_depth.h"
#include "harmony/parser.h"
#include "harmony/render.h"
#include "tokenizer/tokenizer.h"

namespace gossamer::cli {
namespace {

using Json = nlohmann::ordered_json;

struct TemplateArgs {
  std::string model_dir;
  std::string tokenizer_path;
  std::string date;
  bool jsonl = false;
  bool parse = false;
  bool no_header_start = false;
  uint64_t seed = 0;
};

Json render_json(const std::string& request, const Tokenizer& tok,
                 const harmony::RenderOptions& opt) {
  auto r = harmony::render_chat_request(request, tok, opt);
  if (!r.ok()) return Json{{"error", r.status().ToString()}};
  return Json{{"ids", r->ids}, {"text", r->text}};
}

Json event_json(const harmony::ParserEvent& e) {
  Json j{{"type", harmony::event_type_name(e.type)}};
  if (!e.text.empty()) j["text"] = e.text;
  if (!e.call_id.empty()) j["call_id"] = e.call_id;
  if (e.tool_index >= 0) j["index"] = e.tool_index;
  if (e.type == harmony::EventType::kMessageEnd) j["channel"] = e.channel;
  return j;
}

Json parse_json(const std::vector<int32_t>& ids, std::shared_ptr<const Tokenizer> tok,
                const TemplateArgs& a) {
  harmony::ParserOptions opt;
  opt.starts_in_header = !a.no_header_start;
  opt.call_id_seed = a.seed;
  auto p = harmony::StreamingParser::create(std::move(tok), opt);
  if (!p.ok()) return Json{{"error", p.status().ToString()}};
  Json events = Json::array();
  std::vector<harmony::ParserEvent> ev;
  for (int32_t id : ids) {
    p->push(id, ev);
  }
  p->finish(ev);
  for (const auto& e : ev) events.push_back(event_json(e));
  const harmony::ParseResult& r = p->result();
  Json calls = Json::array();
  for (const auto& c : r.tool_calls) {
    calls.push_back(Json{{"id", c.id}, {"name", c.name}, {"arguments", c.arguments}});
  }
  Json result{{"reasoning", r.reasoning},
              {"content", r.content},
              {"tool_calls", calls},
              {"finish", harmony::finish_reason_name(r.finish)},
              {"stopped", r.stopped},
              {"truncated", r.truncated},
              {"reasoning_only", r.reasoning_only},
              {"warnings", r.warnings}};
  return Json{{"events", events}, {"result", result}};
}

// Ids of one completion: a JSON array (jsonl) or whitespace-separated integers.
Result<std::vector<int32_t>> read_ids(const std::string& text, bool json_array) {
  std::vector<int32_t> ids;
  if (json_array) {
    if (json_nesting_exceeds(text)) return InvalidArgument("expected a JSON array of ids");
    Json j = Json::parse(text, nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded() || !j.is_array()) return InvalidArgument("expected a JSON array of ids");
    for (const auto& v : j) {
      if (!v.is_number_integer()) {
        return InvalidArgument("token id is not an integer: " +
                               (v.is_structured() ? std::string(v.type_name()) : v.dump()));
      }
      if (v.get<int64_t>() < 0 || v.get<int64_t>() > INT32_MAX) {
        return InvalidArgument("token id out of range: " + v.dump());
      }
      ids.push_back(v.get<int32_t>());
    }
    return ids;
  }
  std::istringstream in(text);
  std::string word;
  while (in >> word) {
    try {
      size_t used = 0;
      long v = std::stol(word, &used);
      if (used != word.size()) throw std::invalid_argument(word);
      ids.push_back(static_cast<int32_t>(v));
    } catch (const std::exception&) {
      return InvalidArgument("not a token id: '" + word + "'");
    }
  }
  return ids;
}

int run_template(const TemplateArgs& a) {
  const std::string path =
      a.tokenizer_path.empty() ? model_dir_file(a.model_dir, "tokenizer.json") : a.tokenizer_path;
  auto tok = Tokenizer::load(path);
  if (!tok.ok()) {
    std::fprintf(stderr, "apply-template: %s\n", tok.status().ToString().c_str());
    return 1;
  }
  harmony::RenderOptions opt;
  opt.date = a.date;
  if (Status s = opt.validate(); !s.ok()) {
    std::fprintf(stderr, "apply-template: %s\n", s.ToString().c_str());
    return 2;
  }
  if (a.jsonl) {
    std::string line;
    while (std::getline(std::cin, line)) {
      if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
      Json out;
      if (a.parse) {
        auto ids = read_ids(line, /*json_array=*/true);
        out = ids.ok() ? parse_json(*ids, *tok, a) : Json{{"error", ids.status().ToString()}};
      } else {
        out = render_json(line, **tok, opt);
      }
      std::cout << out.dump(-1, ' ', false, Json::error_handler_t::replace) << "\n";
    }
    return 0;
  }
  std::string input((std::istreambuf_iterator<char>(std::cin)), std::istreambuf_iterator<char>());
  if (a.parse) {
    auto ids = read_ids(input, /*json_array=*/false);
    if (!ids.ok()) {
      std::fprintf(stderr, "apply-template --parse: %s\n", ids.status().ToString().c_str());
      return 2;
    }
    std::cout << parse_json(*ids, *tok, a).dump(2, ' ', false, Json::error_handler_t::replace)
              << "\n";
    return 0;
  }
  auto r = harmony::render_chat_request(input, **tok, opt);
  if (!r.ok()) {
    std::fprintf(stderr, "apply-template: %s\n", r.status().ToString().c_str());
    return 2;
  }
  for (size_t i = 0; i < r->ids.size(); ++i) std::cout << (i ? " " : "") << r->ids[i];
  std::cout << "\n" << r->text << "\n";
  return 0;
}

}  // namespace

void add_template_command(CLI::App& app, int* exit_code) {
  auto args = std::make_shared<TemplateArgs>();
  auto* cmd = app.add_subcommand(
      "apply-template", "Render an OpenAI chat request (stdin) to harmony token ids, or parse ids");
  auto* model =
      cmd->add_option("--model", args->model_dir, "Model directory (uses tokenizer.json)");
  auto* tok = cmd->add_option("--tokenizer", args->tokenizer_path, "Path to tokenizer.json");
  model->excludes(tok);
  cmd->add_option("--date", args->date, "Current date YYYY-MM-DD (default: today, UTC)");
  cmd->add_flag("--jsonl", args->jsonl,
                "Batch mode: one JSON input per line, one JSON output per line");
  cmd->add_flag("--parse", args->parse, "Parse generated token ids with the streaming parser");
  cmd->add_flag("--no-header-start", args->no_header_start,
                "--parse: ids start outside a message (not right after <|start|>assistant)");
  cmd->add_option("--seed", args->seed, "--parse: seed for tool call ids (0 = random)");
  cmd->callback([args, exit_code] {
    if (args->model_dir.empty() && args->tokenizer_path.empty()) {
      std::fprintf(stderr, "apply-template: one of --model or --tokenizer is required\n");
      *exit_code = 2;
      return;
    }
    *exit_code = run_template(*args);
  });
}

}  // namespace gossamer::cli
