// The built-in demo model used by `gossamer serve` and `gossamer run` when no --model is given:
// a tiny gpt-oss with random weights and the real o200k_harmony vocabulary, synthesised once into
// $GOSSAMER_CACHE/demo (default ~/.cache/gossamer/demo). Its text is noise.
#pragma once

#include <string>

#include "common/status.h"
#include "model/config.h"

namespace gossamer::cli {

// The `tiny` synth preset with head_dim 64 (what the CUDA kernels need) and 4 query / 2 kv heads,
// so the demo runs on the CPU and the CUDA backend. The `tiny` preset itself is unchanged.
ModelConfig demo_config();

// --tokenizer when given, else ../shared/tokenizer/tokenizer.json beside the repository (looked
// up from the binary's folder and the working directory).
Result<std::string> find_tokenizer(const std::string& given);

// The demo checkpoint directory, synthesised when missing or when its config.json is not
// demo_config() (an older demo). Prints the NOISE warning on stderr, prefixed with `who`.
Result<std::string> demo_model_dir(const std::string& tokenizer_arg, const std::string& who);

}  // namespace gossamer::cli
