// libFuzzer target: safetensors headers, shard indexes and config.json must never crash, hang or
// read out of bounds, whatever the bytes. Run: FUZZ_SECONDS=60 scripts/fuzz.sh safetensors_fuzz
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "model/config.h"
#include "model/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // Exact-size copy so that ASan catches any read past the end of the "file".
  const std::vector<uint8_t> file(data, data + size);
  auto h = gossamer::parse_safetensors_header(file.data(), file.size(), "fuzz");
  if (h.ok()) {
    for (const gossamer::TensorEntry& e : h->tensors) {
      if (h->data_start + e.end > size) __builtin_trap();  // a view past EOF would be a bug
    }
  }
  const std::string text(data, data + size);
  (void)gossamer::parse_safetensors_index(text, "fuzz");
  (void)gossamer::parse_config_json(text, "fuzz");
  return 0;
}
