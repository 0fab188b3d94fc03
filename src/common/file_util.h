// Whole-file reads for small text files (config.json, tokenizer.json, generation_config.json)
// that never block on a FIFO and never treat a directory or a device as a file.
#pragma once

#include <string>

#include "common/status.h"

namespace gossamer {

// The contents of the regular file at `path` (symlinks are followed). Every error message starts
// with `path`:
//   NotFound    nothing is there (or a dangling symlink, or a parent is not a directory);
//   IoError     "PATH: not a regular file" for a directory, FIFO, socket or device: the file is
//               opened with O_NONBLOCK, so a FIFO without a writer does not block, and fstat on
//               the open descriptor decides (no race between a check and the open);
//   IoError     "PATH: cannot open: <reason>" / "PATH: read error: <reason>" otherwise.
Result<std::string> read_regular_file(const std::string& path);

// File `name` of a model directory: DIR/name, or, for the `original/` directory of a gpt-oss
// snapshot (OpenAI's layout ships no tokenizer.json or generation_config.json), the snapshot's
// DIR/../name when only that exists. When neither exists: DIR/name (a read then names it).
std::string model_dir_file(const std::string& dir, const std::string& name);
// A name for the model in DIR: the directory's name (the snapshot's for DIR/original), without
// trailing separators.
std::string model_dir_name(const std::string& dir);

}  // namespace gossamer
