// Placeholder: 'run' is not implemented yet (owned by its issue; replace this file).
#include <CLI/CLI.hpp>
#include <cstdio>

#include "cli/commands.h"

namespace gossamer::cli {

void add_run_commands(CLI::App& app, int* exit_code) {
  auto* cmd = app.add_subcommand("run", "(not implemented yet)");
  cmd->callback([exit_code] {
    std::fprintf(stderr, "gossamer run: not implemented yet\n");
    *exit_code = 1;
  });
}

}  // namespace gossamer::cli
