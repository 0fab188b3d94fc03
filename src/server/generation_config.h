// Stop tokens from a Hugging Face generation_config.json (`eos_token_id`: an int or a list of
// ints). Real gpt-oss snapshots list <|return|>, <|endoftext|> and <|call|> there while
// config.json lists only <|return|>.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/status.h"

namespace gossamer::server {

// The eos ids of MODEL_DIR/generation_config.json; empty when the file does not exist or has no
// eos_token_id. InvalidArgument naming the file and the field for unreadable JSON, wrong types
// (a deeply nested value included) or ids outside [0, vocab_size); IoError "PATH: not a regular
// file" for a directory or FIFO there (a FIFO is not waited on).
Result<std::vector<int32_t>> read_generation_eos(const std::string& model_dir, int64_t vocab_size);

}  // namespace gossamer::server
