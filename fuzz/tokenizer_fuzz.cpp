// libFuzzer target: Tokenizer encode/decode on arbitrary bytes.
// Properties: no crash; decode(encode(s)) == s for every byte string (valid UTF-8 or not,
// with and without special-token recognition); every id is in range; the streaming decoder
// yields valid UTF-8 equal to the lossy decoding of the same bytes.
// The tokenizer comes from $GOSSAMER_TOKENIZER_JSON (default: the real gpt-oss tokenizer at
// ../shared/tokenizer/tokenizer.json relative to the working directory, as scripts/fuzz.sh runs).
#include <cstdio>
#include <cstdlib>
#include <string>

#include "tokenizer/tokenizer.h"
#include "tokenizer/utf8.h"

namespace {

std::shared_ptr<const gossamer::Tokenizer> load_once() {
  const char* env = std::getenv("GOSSAMER_TOKENIZER_JSON");
  const std::string path = env ? env : "../shared/tokenizer/tokenizer.json";
  auto tok = gossamer::Tokenizer::load(path);
  if (!tok.ok()) {
    std::fprintf(stderr, "tokenizer_fuzz: %s\n", tok.status().ToString().c_str());
    std::abort();
  }
  return *tok;
}

// Loaded in LLVMFuzzerInitialize so the (slow, sanitized) JSON parse is not charged to the
// first input's -timeout. libFuzzer's C API leaves no alternative to this file-level pointer.
std::shared_ptr<const gossamer::Tokenizer> g_tok;

}  // namespace

extern "C" int LLVMFuzzerInitialize(int* /*argc*/, char*** /*argv*/) {
  g_tok = load_once();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::shared_ptr<const gossamer::Tokenizer>& tok = g_tok;
  const std::string s(reinterpret_cast<const char*>(data), size);
  for (bool special : {false, true}) {
    const std::vector<int32_t> ids = tok->encode(s, special);
    for (int32_t id : ids) {
      if (id < 0 || id >= tok->vocab_size()) std::abort();
    }
    auto back = tok->decode(ids);
    if (!back.ok() || *back != s) {
      std::fprintf(stderr, "round trip failed (special=%d)\n", special);
      std::abort();
    }
    if (!special) {
      gossamer::IncrementalDecoder dec(tok);
      std::string streamed;
      for (int32_t id : ids) {
        auto piece = dec.push(id);
        if (!piece.ok()) std::abort();
        streamed += *piece;
      }
      streamed += dec.flush();
      if (streamed != gossamer::utf8::sanitize(s)) std::abort();
    }
  }
  return 0;
}
