// config.json of OpenAI's own checkpoint layout (openai/gpt-oss torch/model.py's ModelConfig
// fields). Expected values: the published gpt-oss-20b original/config.json against the
// published Hugging Face config.json of the same model (hand-checked model cards).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "model/config.h"

namespace gossamer {
namespace {

using json = nlohmann::json;

const char* kOriginal20b = R"({
  "num_hidden_layers": 24, "num_experts": 32, "experts_per_token": 4, "vocab_size": 201088,
  "hidden_size": 2880, "intermediate_size": 2880, "swiglu_limit": 7.0, "head_dim": 64,
  "num_attention_heads": 64, "num_key_value_heads": 8, "sliding_window": 128,
  "initial_context_length": 4096, "rope_theta": 150000, "rope_scaling_factor": 32.0,
  "rope_ntk_alpha": 1, "rope_ntk_beta": 32})";

const char* kHf20b = R"({
  "architectures": ["GptOssForCausalLM"], "attention_bias": true, "head_dim": 64,
  "hidden_size": 2880, "initial_context_length": 4096, "intermediate_size": 2880,
  "max_position_embeddings": 131072, "model_type": "gpt_oss", "num_attention_heads": 64,
  "num_experts_per_tok": 4, "num_hidden_layers": 24, "num_key_value_heads": 8,
  "num_local_experts": 32, "quantization_config": {"quant_method": "mxfp4"},
  "rms_norm_eps": 1e-05, "rope_scaling": {"beta_fast": 32.0, "beta_slow": 1.0, "factor": 32.0,
  "original_max_position_embeddings": 4096, "rope_type": "yarn", "truncate": false},
  "rope_theta": 150000, "sliding_window": 128, "swiglu_limit": 7.0,
  "tie_word_embeddings": false, "vocab_size": 201088})";

TEST(OriginalConfig, Published20bEqualsTheHuggingFaceConfig) {
  auto o = parse_config_json(kOriginal20b, "original/config.json");
  auto h = parse_config_json(kHf20b, "config.json");
  ASSERT_TRUE(o.ok()) << o.status().ToString();
  ASSERT_TRUE(h.ok()) << h.status().ToString();
  EXPECT_EQ(config_to_json(*o), config_to_json(*h));  // every field, rope and layer types too
  EXPECT_EQ(o->num_local_experts, 32);
  EXPECT_EQ(o->max_position_embeddings, 131072);
  EXPECT_EQ(o->expert_format, ExpertFormat::kMxfp4);
  ASSERT_EQ(o->layer_types.size(), 24u);
  EXPECT_EQ(o->layer_types[0], LayerType::kSlidingAttention);  // torch/model.py: even layers
  EXPECT_EQ(o->layer_types[1], LayerType::kFullAttention);
}

TEST(OriginalConfig, NtkBetasMapOntoYarnsFastAndSlow) {
  // torch/model.py: YaRN's low correction dim from rope_ntk_beta, its high one from
  // rope_ntk_alpha: transformers' beta_fast and beta_slow.
  json j = json::parse(kOriginal20b);
  j["rope_ntk_beta"] = 24, j["rope_ntk_alpha"] = 2, j["rope_scaling_factor"] = 8.0;
  j["initial_context_length"] = 2048;
  auto c = parse_config_json(j.dump(), "original/config.json");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->rope_scaling.rope_type, "yarn");
  EXPECT_EQ(c->rope_scaling.beta_fast, 24);
  EXPECT_EQ(c->rope_scaling.beta_slow, 2);
  EXPECT_EQ(c->rope_scaling.factor, 8);
  EXPECT_EQ(c->rope_scaling.original_max_position_embeddings, 2048);
  EXPECT_FALSE(c->rope_scaling.truncate);
  EXPECT_EQ(c->max_position_embeddings, 2048 * 8);
  j["rope_scaling_factor"] = 1.0;  // no YaRN: plain RoPE over the initial context
  c = parse_config_json(j.dump(), "original/config.json");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->rope_scaling.rope_type, "none");
  EXPECT_EQ(c->max_position_embeddings, 2048);
}

TEST(OriginalConfig, SlidingWindowZeroMeansEveryLayerFull) {
  json j = json::parse(kOriginal20b);
  j["sliding_window"] = 0;  // torch/model.py: sliding_window 0 on even layers = no window
  auto c = parse_config_json(j.dump(), "original/config.json");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  ASSERT_EQ(c->layer_types.size(), 24u);
  for (LayerType t : c->layer_types) EXPECT_EQ(t, LayerType::kFullAttention);
}

TEST(OriginalConfig, AbsentFieldsTakeTheReferenceDefaults) {
  // torch/model.py's dataclass defaults are the gpt-oss-120b values.
  auto c = parse_config_json(R"({"num_experts": 128})", "original/config.json");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->num_hidden_layers, 36);
  EXPECT_EQ(c->num_local_experts, 128);
  EXPECT_EQ(c->experts_per_token, 4);
  EXPECT_EQ(c->vocab_size, 201088);
  EXPECT_EQ(c->num_key_value_heads, 8);
  EXPECT_EQ(c->sliding_window, 128);
  EXPECT_EQ(c->rope_theta, 150000);
  EXPECT_EQ(c->rope_scaling.factor, 32);
}

TEST(OriginalConfig, ErrorsNameTheOriginalField) {
  json j = json::parse(kOriginal20b);
  j["num_experts"] = "thirty-two";
  auto c = parse_config_json(j.dump(), "m/original/config.json");
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("num_experts"), std::string::npos) << c.status().message();
  EXPECT_NE(c.status().message().find("m/original/config.json"), std::string::npos);
  j = json::parse(kOriginal20b);
  j["rope_ntk_beta"] = nullptr, j["rope_scaling_factor"] = "x";
  c = parse_config_json(j.dump(), "original/config.json");
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("rope_scaling_factor"), std::string::npos);
  j = json::parse(kOriginal20b);
  j["rope_scaling_factor"] = 1e300;  // no context that long (and no undefined cast on the way)
  c = parse_config_json(j.dump(), "original/config.json");
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("rope_scaling_factor"), std::string::npos);
  j["rope_scaling_factor"] = 32, j["initial_context_length"] = -4096;
  c = parse_config_json(j.dump(), "original/config.json");
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("initial_context_length"), std::string::npos);
}

}  // namespace
}  // namespace gossamer
