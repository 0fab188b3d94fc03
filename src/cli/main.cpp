#include <CLI/CLI.hpp>
#include <cstdio>
#include <exception>
#include <new>

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
  // The commands report their errors as Status; what escapes them is an exit with a message,
  // never an abort.
  try {
    CLI11_PARSE(app, argc, argv);
  } catch (const std::bad_alloc&) {
    std::fprintf(stderr,
                 "gossamer: out of memory (a size from the command line, the model or the input "
                 "needs more memory than this machine has)\n");
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "gossamer: internal error: %s\n", e.what());
    return 1;
  }
  return exit_code;
}
