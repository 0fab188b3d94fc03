// libFuzzer target for the streaming harmony parser (src/harmony/parser.h).
//
// Input bytes -> token ids, biased to harmony's special tokens:
//   byte 0           : options (bit 0: starts_in_header, bits 1-5: max_header_tokens)
//   0x00-0x07, 0x10-0x1F : a special token (<|start|>, <|end|>, <|message|>, <|channel|>, ...)
//   0x08 b1 b2 b3        : an arbitrary id (may be out of the vocabulary or negative)
//   anything else        : the one-byte token of that byte (incl. UTF-8 lead/continuation)
// Checks: no crash/UB (run under ASan+UBSan), every text delta is valid UTF-8, the events
// concatenate to the non-streaming result, and stopped/truncated are consistent.
// Uses the byte-level test tokenizer, so no files are needed.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "harmony/parser.h"
#include "harmony/test_util.h"

namespace {

using gossamer::harmony::EventType;
using gossamer::harmony::ParserEvent;

constexpr int32_t kSpecials[] = {200006, 200007, 200008, 200005, 200003, 200002, 200012, 199999};

void check(bool ok) {
  if (!ok) __builtin_trap();
}

std::vector<int32_t> to_ids(const uint8_t* data, size_t size) {
  std::vector<int32_t> ids;
  for (size_t i = 1; i < size; ++i) {
    const uint8_t b = data[i];
    if (b < 0x08 || (b >= 0x10 && b < 0x20)) {
      ids.push_back(kSpecials[b % 8]);
    } else if (b == 0x08) {
      if (i + 3 >= size) break;
      const uint32_t v = uint32_t{data[i + 1]} << 16 | uint32_t{data[i + 2]} << 8 | data[i + 3];
      ids.push_back(static_cast<int32_t>(v) - 0x100000);
      i += 3;
    } else {
      ids.push_back(b);
    }
  }
  return ids;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const auto tok = std::make_shared<gossamer::harmony::testing::ByteTokenizer>();
  if (size == 0) return 0;
  gossamer::harmony::ParserOptions opt;
  opt.starts_in_header = data[0] & 1;
  opt.max_header_tokens = 1 + ((data[0] >> 1) & 31);
  opt.call_id_seed = 1;
  auto parser = gossamer::harmony::StreamingParser::create(tok, opt);
  check(parser.ok());
  std::vector<ParserEvent> ev;
  for (int32_t id : to_ids(data, size)) parser->push(id, ev);
  parser->finish(ev);
  const auto& r = parser->result();
  std::string reasoning, content;
  std::vector<std::string> args;
  for (const auto& e : ev) {
    if (e.type == EventType::kReasoningDelta || e.type == EventType::kContentDelta ||
        e.type == EventType::kToolCallArgumentsDelta) {
      check(gossamer::harmony::testing::valid_utf8(e.text));
    }
    if (e.type == EventType::kReasoningDelta) reasoning += e.text;
    if (e.type == EventType::kContentDelta) content += e.text;
    if (e.type == EventType::kToolCallStart) args.emplace_back();
    if (e.type == EventType::kToolCallArgumentsDelta) {
      check(e.tool_index >= 0 && static_cast<size_t>(e.tool_index) + 1 == args.size());
      args.back() += e.text;
    }
  }
  check(reasoning == r.reasoning && content == r.content);
  check(args.size() == r.tool_calls.size());
  for (size_t i = 0; i < args.size(); ++i) check(args[i] == r.tool_calls[i].arguments);
  check(r.truncated == !r.stopped);
  return 0;
}
