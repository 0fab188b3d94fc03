// Tokenizer::load: parse a Hugging Face tokenizer.json (byte-level BPE only) into BpeTokenizer.
// No JSON value is copied, dumped or walked recursively (a deeply nested value must be an error,
// not a stack overflow), and nlohmann's throwing accessors are used only after a type check.
#include <cstdint>
#include <nlohmann/json.hpp>

#include "common/file_util.h"
#include "common/json_depth.h"
#include "tokenizer/byte_level.h"
#include "tokenizer/flat_tables.h"
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

// Pre-tokenizer Sequences nest at most this deep (real tokenizers use one level).
constexpr int kMaxSequenceDepth = 32;

std::string type_of(const json& j) {
  return j.is_object() && j.contains("type") && j["type"].is_string() ? j["type"].get<std::string>()
                                                                      : "";
}

// obj[key] when obj is an object that has it and it is not null; else nullptr.
const json* find(const json& obj, const char* key) {
  if (!obj.is_object()) return nullptr;
  const auto it = obj.find(key);
  return it == obj.end() || it->is_null() ? nullptr : &*it;
}

// A boolean option: `def` when absent or null, an error naming where.key when not a boolean.
Result<bool> get_bool(const json& obj, const char* key, bool def, const std::string& where) {
  const json* v = find(obj, key);
  if (v == nullptr) return def;
  if (!v->is_boolean()) return Corrupt(where + "." + key + ": not a boolean");
  return v->get<bool>();
}

// A token id: an integer in [0, INT32_MAX].
bool get_id(const json& v, int32_t* out) {
  if (!v.is_number_integer()) return false;
  if (v.is_number_unsigned() ? v.get<uint64_t>() > INT32_MAX
                             : v.get<int64_t>() < 0 || v.get<int64_t>() > INT32_MAX) {
    return false;
  }
  *out = static_cast<int32_t>(v.get<int64_t>());
  return true;
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

Status add_split(const json& pt, const std::string& where,
                 std::vector<std::unique_ptr<Splitter>>* splitters) {
  const json* behavior = find(pt, "behavior");
  GS_ASSIGN_OR_RETURN(const bool invert, get_bool(pt, "invert", false, where));
  if (behavior == nullptr || !behavior->is_string() || behavior->get<std::string>() != "Isolated" ||
      invert) {
    return Unsupported(where + ": only Split with behavior Isolated and invert false");
  }
  const json* pat = find(pt, "pattern");
  const json* re = pat != nullptr ? find(*pat, "Regex") : nullptr;
  const json* str = pat != nullptr ? find(*pat, "String") : nullptr;
  std::string regex;
  if (re != nullptr && re->is_string()) {
    regex = re->get<std::string>();
  } else if (str != nullptr && str->is_string()) {
    regex = regex_quote(str->get<std::string>());
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

Status add_pretokenizer(const json& pt, const std::string& where, int depth,
                        std::vector<std::unique_ptr<Splitter>>* splitters, bool* byte_level) {
  const std::string type = type_of(pt);
  if (type == "Sequence") {
    if (depth >= kMaxSequenceDepth) {
      return Unsupported(where + ": Sequence nested more than " +
                         std::to_string(kMaxSequenceDepth) + " deep");
    }
    const json* list = find(pt, "pretokenizers");
    if (list == nullptr || !list->is_array()) {
      return Corrupt(where + ".pretokenizers: missing or not an array");
    }
    for (size_t i = 0; i < list->size(); ++i) {
      GS_RETURN_IF_ERROR(add_pretokenizer((*list)[i],
                                          where + ".pretokenizers[" + std::to_string(i) + "]",
                                          depth + 1, splitters, byte_level));
    }
    return Status::Ok();
  }
  if (type == "ByteLevel") {
    GS_ASSIGN_OR_RETURN(const bool prefix_space, get_bool(pt, "add_prefix_space", false, where));
    if (prefix_space) return Unsupported(where + ": ByteLevel.add_prefix_space = true");
    *byte_level = true;
    GS_ASSIGN_OR_RETURN(const bool use_regex, get_bool(pt, "use_regex", true, where));
    if (use_regex) {
      GS_ASSIGN_OR_RETURN(auto s, RegexSplitter::create(kGpt2Pattern));
      splitters->push_back(std::move(s));
    }
    return Status::Ok();
  }
  if (type == "Split") return add_split(pt, where, splitters);
  return Unsupported(where + ": pre-tokenizer type '" + type + "'");
}

Status check_model_options(const json& m) {
  if (type_of(m) != "BPE") return Unsupported("model.type '" + type_of(m) + "' (only BPE)");
  if (m.contains("dropout") && !m["dropout"].is_null()) return Unsupported("model.dropout");
  for (const char* k : {"continuing_subword_prefix", "end_of_word_suffix"}) {
    const json* v = find(m, k);
    if (v != nullptr && !(v->is_string() && v->get_ref<const std::string&>().empty())) {
      return Unsupported(std::string("model.") + k);
    }
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
    int32_t id = 0;
    if (!get_id(val, &id)) {
      return Corrupt("model.vocab[\"" + key + "\"]: id is not an integer in [0, 2^31)");
    }
    GS_ASSIGN_OR_RETURN(std::string bytes, bl.decode(key, "model.vocab[\"" + key + "\"]"));
    vocab.emplace_back(std::move(bytes), id);
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
  GS_ASSIGN_OR_RETURN(const bool ignore_merges, get_bool(m, "ignore_merges", false, "model"));
  return tok::BpeModel::build(vocab, merges, ignore_merges);
}

Result<std::vector<AddedToken>> parse_added(const json& j) {
  std::vector<AddedToken> out;
  if (!j.contains("added_tokens") || j["added_tokens"].is_null()) return out;
  if (!j["added_tokens"].is_array()) return Corrupt("added_tokens: not an array");
  for (size_t i = 0; i < j["added_tokens"].size(); ++i) {
    const json& t = j["added_tokens"][i];
    const std::string where = "added_tokens[" + std::to_string(i) + "]";
    const json* id = find(t, "id");
    const json* content = find(t, "content");
    int32_t id_value = 0;
    if (id == nullptr || !get_id(*id, &id_value) || content == nullptr || !content->is_string() ||
        content->get_ref<const std::string&>().empty()) {
      return Corrupt(where + ": needs an integer id in [0, 2^31) and non-empty content");
    }
    if (id_value >=
        tok::PairMap::kMaxValue) {  // as model.vocab: the vocabulary is sized by the ids
      return Unsupported(where + ": id " + std::to_string(id_value) + " above the largest " +
                         "supported token id " + std::to_string(tok::PairMap::kMaxValue - 1));
    }
    for (const char* k : {"lstrip", "rstrip", "single_word"}) {
      GS_ASSIGN_OR_RETURN(const bool on, get_bool(t, k, false, where));
      if (on) return Unsupported(where + ": lstrip/rstrip/single_word");
    }
    GS_ASSIGN_OR_RETURN(const bool special, get_bool(t, "special", false, where));
    out.push_back({content->get<std::string>(), id_value, special});
  }
  return out;
}

Result<std::shared_ptr<const Tokenizer>> build_tokenizer(const json& j, const std::string& source) {
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
    Status s = add_pretokenizer(j["pre_tokenizer"], "pre_tokenizer", 0, &splitters, &byte_level);
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

}  // namespace

Result<std::shared_ptr<const Tokenizer>> Tokenizer::load_from_json(std::string_view text,
                                                                   const std::string& source) {
  json j;
  if (size_t nul = json_nul_byte(text); nul != std::string::npos) {
    return Corrupt(source + ": not valid JSON (a NUL byte at byte offset " + std::to_string(nul) +
                   ")");
  }
  try {
    j = json::parse(text);
  } catch (const json::exception& e) {
    return Corrupt(source + ": not valid JSON: " + e.what());
  }
  try {  // every access is type-checked first; this only keeps a missed case from aborting
    return build_tokenizer(j, source);
  } catch (const json::exception& e) {
    return Corrupt(source + ": " + e.what());
  }
}

Result<std::shared_ptr<const Tokenizer>> Tokenizer::load(const std::string& path) {
  // Not a FIFO (opening one would wait for a writer), a directory or a device.
  auto text = read_regular_file(path);
  if (!text.ok()) return text.status().With("tokenizer");
  return load_from_json(text.value(), path);
}

}  // namespace gossamer
