#include <CLI/CLI.hpp>

#include "cli/commands.h"

int main(int argc, char** argv) {
  CLI::App app{"gossamer: inference engine and OpenAI-compatible server for gpt-oss"};
  app.require_subcommand(1);
  int exit_code = 0;
  gossamer::cli::add_synth_command(app, &exit_code);
  gossamer::cli::add_run_commands(app, &exit_code);
  gossamer::cli::add_tokenizer_commands(app, &exit_code);
  gossamer::cli::add_template_command(app, &exit_code);
  gossamer::cli::add_serve_command(app, &exit_code);
  gossamer::cli::add_bench_command(app, &exit_code);
  gossamer::cli::add_inspect_command(app, &exit_code);
  CLI11_PARSE(app, argc, argv);
  return exit_code;
}
