// Each `gossamer` subcommand registers itself on the CLI11 app. A command's callback stores its
// process exit code in *exit_code (0 ok, 1 runtime error, 2 usage error) and prints errors to
// stderr; nothing calls exit().
#pragma once

namespace CLI {
class App;
}

namespace gossamer::cli {

void add_synth_command(CLI::App& app, int* exit_code);  // synth_cmd.cpp
void add_run_commands(CLI::App& app, int* exit_code);   // run_cmd.cpp: run, logits
void add_tokenizer_commands(CLI::App& app,
                            int* exit_code);               // tokenize_cmd.cpp: tokenize, detokenize
void add_template_command(CLI::App& app, int* exit_code);  // template_cmd.cpp: apply-template
void add_serve_command(CLI::App& app, int* exit_code);     // serve_cmd.cpp
void add_bench_command(CLI::App& app, int* exit_code);     // bench_cmd.cpp
void add_inspect_command(CLI::App& app, int* exit_code);   // inspect_cmd.cpp

}  // namespace gossamer::cli
