// Placeholder: 'apply-template' is not implemented yet (owned by its issue; replace this file).
#include <CLI/CLI.hpp>
#include <cstdio>

#include "cli/commands.h"

namespace gossamer::cli {

void add_template_command(CLI::App& app, int* exit_code) {
  auto* cmd = app.add_subcommand("apply-template", "(not implemented yet)");
  cmd->callback([exit_code] {
    std::fprintf(stderr, "gossamer apply-template: not implemented yet\n");
    *exit_code = 1;
  });
}

}  // namespace gossamer::cli
