// `gossamer tokenize` and `gossamer detokenize`.
//   gossamer tokenize --tokenizer FILE | --model DIR [--text T | stdin] [--special]
//       prints the ids, comma-separated, on one line.
//   gossamer tokenize ... --jsonl    one JSON value per stdin line: "text" or
//       {"text": "..."} or {"hex": "<bytes in hex>"} (optionally "special": bool); prints one
//       JSON array of ids per line ({"error": "..."} for a bad line, exit code 1 at the end).
//   gossamer detokenize --tokenizer FILE --ids 1,2,3 [--stream]   prints the text bytes.
//   gossamer detokenize ... --jsonl  one JSON array of ids per stdin line; prints
//       {"hex": "<decoded bytes>"} per line. --stream decodes through IncrementalDecoder.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <iostream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <string>

#include "cli/commands.h"
#include "common/file_util.h"
#include "tokenizer/tokenizer.h"

namespace gossamer::cli {
namespace {

using nlohmann::json;

struct TokOptions {
  std::string tokenizer_path, model_dir, text, ids;
  bool text_set = false, special = false, jsonl = false, stream = false;
};

Result<std::shared_ptr<const Tokenizer>> open_tokenizer(const TokOptions& o) {
  if (o.tokenizer_path.empty() == o.model_dir.empty()) {
    return InvalidArgument("give exactly one of --tokenizer FILE or --model DIR");
  }
  return Tokenizer::load(o.tokenizer_path.empty() ? model_dir_file(o.model_dir, "tokenizer.json")
                                                  : o.tokenizer_path);
}

std::string to_hex(std::string_view s) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out;
  for (char c : s) {
    out += kDigits[static_cast<uint8_t>(c) >> 4];
    out += kDigits[static_cast<uint8_t>(c) & 15];
  }
  return out;
}

Result<std::string> from_hex(std::string_view h) {
  const auto val = [](char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  };
  if (h.size() % 2) return InvalidArgument("hex string has odd length");
  std::string out;
  for (size_t i = 0; i < h.size(); i += 2) {
    const int a = val(h[i]), b = val(h[i + 1]);
    if (a < 0 || b < 0) return InvalidArgument("bad hex digit at offset " + std::to_string(i));
    out += static_cast<char>(a * 16 + b);
  }
  return out;
}

// Parses "1,2,3" / "1 2 3" / "[1, 2, 3]".
Result<std::vector<int32_t>> parse_ids(std::string_view s) {
  std::vector<int32_t> ids;
  size_t i = 0;
  while (i < s.size()) {
    const char c = s[i];
    if (c == ',' || c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '[' || c == ']') {
      ++i;
      continue;
    }
    size_t j = i;
    if (s[j] == '-') ++j;
    while (j < s.size() && s[j] >= '0' && s[j] <= '9') ++j;
    if (j == i || (j == i + 1 && s[i] == '-') || j - i > 11) {
      return InvalidArgument("bad token id at offset " + std::to_string(i) + " of the id list");
    }
    const long long v = std::stoll(std::string(s.substr(i, j - i)));
    if (v < INT32_MIN || v > INT32_MAX)
      return InvalidArgument("token id out of range: " + std::to_string(v));
    ids.push_back(static_cast<int32_t>(v));
    i = j;
  }
  return ids;
}

std::string join_ids(const std::vector<int32_t>& ids) {
  std::string out;
  for (size_t i = 0; i < ids.size(); ++i) {
    if (i) out += ',';
    out += std::to_string(ids[i]);
  }
  return out;
}

Result<std::vector<int32_t>> tokenize_json_line(const Tokenizer& tok, const std::string& line,
                                                bool special) {
  json j;
  try {
    j = json::parse(line);
  } catch (const json::exception& e) {
    return InvalidArgument(std::string("not valid JSON: ") + e.what());
  }
  if (j.is_string()) return tok.encode(j.get<std::string>(), special);
  if (!j.is_object()) return InvalidArgument("expected a string or an object");
  if (j.contains("special") && j["special"].is_boolean()) special = j["special"].get<bool>();
  if (j.contains("text") && j["text"].is_string())
    return tok.encode(j["text"].get<std::string>(), special);
  if (j.contains("hex") && j["hex"].is_string()) {
    GS_ASSIGN_OR_RETURN(std::string bytes, from_hex(j["hex"].get<std::string>()));
    return tok.encode(bytes, special);
  }
  return InvalidArgument("object needs a \"text\" or \"hex\" string");
}

Result<std::string> detokenize(const Tokenizer& tok, std::shared_ptr<const Tokenizer> shared,
                               const std::vector<int32_t>& ids, bool stream) {
  if (!stream) return tok.decode(ids);
  IncrementalDecoder dec(std::move(shared));
  std::string out;
  for (int32_t id : ids) {
    GS_ASSIGN_OR_RETURN(std::string piece, dec.push(id));
    out += piece;
  }
  return out + dec.flush();
}

int run_jsonl(const TokOptions& o, const std::shared_ptr<const Tokenizer>& tok, bool encode) {
  int rc = 0;
  std::string line;
  size_t line_no = 0;
  while (std::getline(std::cin, line)) {
    ++line_no;
    std::string out;
    if (encode) {
      auto ids = tokenize_json_line(*tok, line, o.special);
      // (an error message may quote the line's bytes: invalid UTF-8 is replaced, not thrown)
      out = ids.ok()
                ? json(*ids).dump()
                : json{{"error", "line " + std::to_string(line_no) + ": " + ids.status().message()}}
                      .dump(-1, ' ', false, json::error_handler_t::replace);
      rc = ids.ok() ? rc : 1;
    } else {
      auto ids = parse_ids(line);
      auto text =
          ids.ok() ? detokenize(*tok, tok, *ids, o.stream) : Result<std::string>(ids.status());
      out =
          text.ok()
              ? json{{"hex", to_hex(*text)}}.dump()
              : json{{"error", "line " + std::to_string(line_no) + ": " + text.status().message()}}
                    .dump(-1, ' ', false, json::error_handler_t::replace);
      rc = text.ok() ? rc : 1;
    }
    out += '\n';
    std::fwrite(out.data(), 1, out.size(), stdout);
  }
  return rc;
}

int run_tokenize(const TokOptions& o) {
  auto tok = open_tokenizer(o);
  if (!tok.ok()) {
    std::fprintf(stderr, "gossamer tokenize: %s\n", tok.status().ToString().c_str());
    return tok.status().code() == StatusCode::kInvalidArgument ? 2 : 1;
  }
  if (o.jsonl) return run_jsonl(o, *tok, /*encode=*/true);
  std::string text = o.text;
  if (!o.text_set) text.assign(std::istreambuf_iterator<char>(std::cin), {});
  const std::string out = join_ids((*tok)->encode(text, o.special)) + "\n";
  std::fwrite(out.data(), 1, out.size(), stdout);
  return 0;
}

int run_detokenize(const TokOptions& o) {
  auto tok = open_tokenizer(o);
  if (!tok.ok()) {
    std::fprintf(stderr, "gossamer detokenize: %s\n", tok.status().ToString().c_str());
    return tok.status().code() == StatusCode::kInvalidArgument ? 2 : 1;
  }
  if (o.jsonl) return run_jsonl(o, *tok, /*encode=*/false);
  std::string id_text = o.ids;
  if (id_text.empty()) id_text.assign(std::istreambuf_iterator<char>(std::cin), {});
  auto ids = parse_ids(id_text);
  auto text =
      ids.ok() ? detokenize(**tok, *tok, *ids, o.stream) : Result<std::string>(ids.status());
  if (!text.ok()) {
    std::fprintf(stderr, "gossamer detokenize: %s\n", text.status().ToString().c_str());
    return ids.ok() ? 1 : 2;
  }
  std::fwrite(text->data(), 1, text->size(), stdout);
  return 0;
}

void add_source_options(CLI::App* cmd, TokOptions* o) {
  cmd->add_option("--tokenizer", o->tokenizer_path, "tokenizer.json file");
  cmd->add_option("--model", o->model_dir, "model directory containing tokenizer.json");
  cmd->add_flag("--jsonl", o->jsonl,
                "batch mode: one JSON value per stdin line (see docs/tokenizer.md)");
}

}  // namespace

void add_tokenizer_commands(CLI::App& app, int* exit_code) {
  auto opts = std::make_shared<TokOptions>();
  auto* tok = app.add_subcommand("tokenize", "Print the token ids of a text");
  add_source_options(tok, opts.get());
  tok->add_option("--text", opts->text, "text to encode (default: all of stdin)");
  tok->add_flag("--special", opts->special,
                "recognise special tokens such as <|start|> in the text");
  tok->callback([opts, exit_code, tok] {
    opts->text_set = tok->count("--text") > 0;
    *exit_code = run_tokenize(*opts);
  });
  auto* detok = app.add_subcommand("detokenize", "Print the text of token ids");
  add_source_options(detok, opts.get());
  detok->add_option("--ids", opts->ids, "ids, e.g. 1,2,3 (default: read from stdin)");
  detok->add_flag("--stream", opts->stream, "decode through the streaming IncrementalDecoder");
  detok->callback([opts, exit_code] { *exit_code = run_detokenize(*opts); });
}

}  // namespace gossamer::cli
