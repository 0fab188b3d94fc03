// Model presets for `gossamer synth`: the real gpt-oss-20b / gpt-oss-120b configs (as in the
// published config.json files) and a tiny model that keeps the real vocabulary so the real
// tokenizer works with it.
#include <string>

#include "model/config.h"

namespace gossamer {
namespace {

// Fields shared by every preset (identical in both released gpt-oss configs).
ModelConfig common_config() {
  ModelConfig c;
  c.vocab_size = 201088;
  c.max_position_embeddings = 131072;
  c.initial_context_length = 4096;
  c.rope_theta = 150000.0;
  c.rms_norm_eps = 1e-5;
  c.swiglu_limit = 7.0;
  c.rope_scaling.rope_type = "yarn";
  c.rope_scaling.factor = 32.0;
  c.rope_scaling.beta_fast = 32.0;
  c.rope_scaling.beta_slow = 1.0;
  c.rope_scaling.original_max_position_embeddings = 4096;
  c.rope_scaling.truncate = false;
  // config.json lists only <|return|>; generation_config.json (written by synth) adds
  // <|endoftext|> 199999 and <|call|> 200012 as real snapshots do.
  c.eos_token_ids = {200002};
  c.pad_token_id = 199999;
  c.tie_word_embeddings = false;
  c.attention_bias = true;
  c.expert_format = ExpertFormat::kMxfp4;
  c.head_dim = 64;
  c.num_attention_heads = 64;
  c.num_key_value_heads = 8;
  c.hidden_size = 2880;
  c.intermediate_size = 2880;
  c.sliding_window = 128;
  c.experts_per_token = 4;
  return c;
}

void alternate_layer_types(ModelConfig* c) {
  c->layer_types.clear();
  for (int64_t i = 0; i < c->num_hidden_layers; ++i) {
    c->layer_types.push_back(i % 2 == 0 ? LayerType::kSlidingAttention : LayerType::kFullAttention);
  }
}

}  // namespace

Result<ModelConfig> preset_config(const std::string& name) {
  ModelConfig c = common_config();
  if (name == "120b") {
    c.num_hidden_layers = 36;
    c.num_local_experts = 128;
  } else if (name == "20b") {
    c.num_hidden_layers = 24;
    c.num_local_experts = 32;
  } else if (name == "tiny") {
    // ~50 MB: the real vocabulary dominates (2 x 201088 x 64 bf16 for embed + lm_head).
    c.hidden_size = 64;
    c.intermediate_size = 64;
    c.num_hidden_layers = 2;
    c.num_attention_heads = 4;
    c.num_key_value_heads = 2;
    c.head_dim = 16;
    c.num_local_experts = 4;
    c.experts_per_token = 2;
    c.sliding_window = 8;
  } else {
    return NotFound("unknown preset '" + name + "' (expected tiny, 20b or 120b)");
  }
  alternate_layer_types(&c);
  return c;
}

}  // namespace gossamer
