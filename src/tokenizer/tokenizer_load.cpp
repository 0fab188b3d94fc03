// Tokenizer::load: parse a Hugging Face tokenizer.json (byte-level BPE only) into BpeTokenizer.
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "tokenizer/byte_level.h"
#include "tokenizer/o200k_splitter.h"
#include "tokenizer/tokenizer_impl.h"

namespace gossamer {
namespace {

using nlohmann::json;
using tok::AddedToken;
using tok::RegexSplitter;
using tok::Splitter;

// GPT-2's pattern, used by a ByteLevel pre-tokenizer with use_regex = true.
constexpr std::string_view kGpt2Pattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

std::string type_of(const json& j) {
  return j.is_object() && j.contains("type") && j["type"].is_string() ? j["type"].get<std::string>()
                                                                      : "";
}

// Escapes a literal string for PCRE2.
std::string regex_quote(std::string_view s) {
  std::string out;
  for (char c : s) {
    if (std::string_view("\\^$.|?*+()[]{}").find(c) != std::string_view::npos) out += '\\';
    out += c;
  }
  return out;
}

Status add_pretokenizer(const json& pt, const std::string& where,
                        std::vector<std::unique_ptr<Splitter>>* splitters, bool* byte_level) {
  const std::string type = type_of(pt);
  if (type == "Sequence") {
    if (!pt.contains("pretokenizers") || !pt["pretokenizers"].is_array()) {
      return Corrupt(where + ".pretokenizers: missing or not an array");
    }
    for (size_t i = 0; i < pt["pretokenizers"].size(); ++i) {
      GS_RETURN_IF_ERROR(add_pretokenizer(pt["pretokenizers"][i],
                                          where + ".pretokenizers[" + std::to_string(i) + "]",
                                          splitters, byte_level));
    }
    return Status::Ok();
  }
  if (type == "ByteLevel") {
    if (pt.value("add_prefix_space", false)) {
      return Unsupported(where + ": ByteLevel.add_prefix_space = true");
    }
    *byte_level = true;
    if (pt.value("use_regex", true)) {
      GS_ASSIGN_OR_RETURN(auto s, RegexSplitter::create(kGpt2Pattern));
      splitters->push_back(std::move(s));
    }
    return Status::Ok();
  }
  if (type == "Split") {
    if (pt.value("behavior", std::string()) != "Isolated" || pt.value("invert", false)) {
      return Unsupported(where + ": only Split with behavior Isolated and invert false");
    }
    const json& pat = pt.value("pattern", json::object());
    std::string regex;
    if (pat.contains("Regex") && pat["Regex"].is_string()) {
      regex = pat["Regex"].get<std::string>();
    } else if (pat.contains("String") && pat["String"].is_string()) {
      regex = regex_quote(pat["String"].get<std::string>());
    } else {
      return Corrupt(where + ".pattern: expected {\"Regex\": ...} or {\"String\": ...}");
    }
    if (regex == tok::kO200kPattern) {  // hand-written, faster, Unicode 16 classes
      splitters->push_back(std::make_unique<tok::O200kSplitter>());
      return Status::Ok();
    }
    auto s = RegexSplitter::create(regex);
    if (!s.ok()) return s.status().With(where);
    splitters->push_back(std::move(s).value());
    return Status::Ok();
  }
  return Unsupported(where + ": pre-tokenizer type '" + type + "'");
}

Status check_model_options(const json& m) {
  if (type_of(m) != "BPE") return Unsupported("model.type '" + type_of(m) + "' (only BPE)");
  if (m.contains("dropout") && !m["dropout"].is_null()) return Unsupported("model.dropout");
  for (const char* k : {"continuing_subword_prefix", "end_of_word_suffix"}) {
    if (m.contains(k) && !m[k].is_null() && m[k] != "")
      return Unsupported(std::string("model.") + k);
  }
  if (!m.contains("vocab") || !m["vocab"].is_object()) return Corrupt("model.vocab: missing");
  if (!m.contains("merges") || !m["merges"].is_array()) return Corrupt("model.merges: missing");
  return Status::Ok();
}

Result<tok::BpeModel> build_model(const json& m, const tok::ByteLevelMap& bl) {
  GS_RETURN_IF_ERROR(check_model_options(m));
  std::vector<std::pair<std::string, int32_t>> vocab;
  vocab.reserve(m["vocab"].size());
  for (const auto& [key, val] : m["vocab"].items()) {
    if (!val.is_number_integer()) return Corrupt("model.vocab[\"" + key + "\"]: id not an integer");
    GS_ASSIGN_OR_RETURN(std::string bytes, bl.decode(key, "model.vocab[\"" + key + "\"]"));
    vocab.emplace_back(std::move(bytes), val.get<int32_t>());
  }
  std::vector<std::pair<std::string, std::string>> merges;
  merges.reserve(m["merges"].size());
  for (size_t r = 0; r < m["merges"].size(); ++r) {
    const json& e = m["merges"][r];
    const std::string where = "model.merges[" + std::to_string(r) + "]";
    std::string l, rt;
    if (e.is_array() && e.size() == 2 && e[0].is_string() && e[1].is_string()) {
      l = e[0].get<std::string>();
      rt = e[1].get<std::string>();
    } else if (e.is_string() && e.get<std::string>().find(' ') != std::string::npos) {
      const std::string s = e.get<std::string>();
      l = s.substr(0, s.find(' '));
      rt = s.substr(s.find(' ') + 1);
    } else {
      return Corrupt(where + ": expected [left, right] or \"left right\"");
    }
    GS_ASSIGN_OR_RETURN(std::string lb, bl.decode(l, where));
    GS_ASSIGN_OR_RETURN(std::string rb, bl.decode(rt, where));
    merges.emplace_back(std::move(lb), std::move(rb));
  }
  return tok::BpeModel::build(vocab, merges, m.value("ignore_merges", false));
}

Result<std::vector<AddedToken>> parse_added(const json& j) {
  std::vector<AddedToken> out;
  if (!j.contains("added_tokens") || j["added_tokens"].is_null()) return out;
  if (!j["added_tokens"].is_array()) return Corrupt("added_tokens: not an array");
  for (size_t i = 0; i < j["added_tokens"].size(); ++i) {
    const json& t = j["added_tokens"][i];
    const std::string where = "added_tokens[" + std::to_string(i) + "]";
    if (!t.is_object() || !t.contains("id") || !t["id"].is_number_integer() || t["id"] < 0 ||
        !t.contains("content") || !t["content"].is_string() || t["content"] == "") {
      return Corrupt(where + ": needs a non-negative integer id and non-empty content");
    }
    if (t.value("lstrip", false) || t.value("rstrip", false) || t.value("single_word", false)) {
      return Unsupported(where + ": lstrip/rstrip/single_word");
    }
    out.push_back(
        {t["content"].get<std::string>(), t["id"].get<int32_t>(), t.value("special", false)});
  }
  return out;
}

}  // namespace

Result<std::shared_ptr<const Tokenizer>> Tokenizer::load_from_json(std::string_view text,
                                                                   const std::string& source) {
  json j;
  try {
    j = json::parse(text);
  } catch (const json::exception& e) {
    return Corrupt(source + ": not valid JSON: " + e.what());
  }
  const auto in = [&](Status s) { return s.With(source); };
  if (!j.is_object() || !j.contains("model")) return in(Corrupt("no \"model\" object"));
  if (j.contains("normalizer") && !j["normalizer"].is_null()) {
    return in(Unsupported("normalizer of type '" + type_of(j["normalizer"]) + "'"));
  }
  for (const char* k : {"post_processor", "decoder"}) {
    if (j.contains(k) && !j[k].is_null() && type_of(j[k]) != "ByteLevel") {
      return in(Unsupported(std::string(k) + " of type '" + type_of(j[k]) + "'"));
    }
  }
  std::vector<std::unique_ptr<Splitter>> splitters;
  bool byte_level = false;
  if (j.contains("pre_tokenizer") && !j["pre_tokenizer"].is_null()) {
    Status s = add_pretokenizer(j["pre_tokenizer"], "pre_tokenizer", &splitters, &byte_level);
    if (!s.ok()) return in(s);
  }
  if (!byte_level) return in(Unsupported("pre_tokenizer has no ByteLevel step"));
  const tok::ByteLevelMap bl;
  auto model = build_model(j["model"], bl);
  if (!model.ok()) return in(model.status());
  auto added = parse_added(j);
  if (!added.ok()) return in(added.status());
  return std::shared_ptr<const Tokenizer>(std::make_shared<tok::BpeTokenizer>(
      std::move(model).value(), std::move(splitters), std::move(added).value()));
}

Result<std::shared_ptr<const Tokenizer>> Tokenizer::load(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return NotFound("cannot open tokenizer file '" + path + "'");
  std::stringstream ss;
  ss << f.rdbuf();
  if (f.bad()) return IoError("error reading '" + path + "'");
  return load_from_json(ss.str(), path);
}

}  // namespace gossamer
