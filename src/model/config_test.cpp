// config.json parsing and validation. Expected values are the published gpt-oss-120b/20b
// config.json values (hand-checked against the HF model cards), not our own output.
#include "model/config.h"

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>

namespace gossamer {
namespace {

using json = nlohmann::json;

// A gpt-oss-120b config.json in HF's own layout (extra keys HF writes are included and must be
// ignored).
json real_120b() {
  json layer_types = json::array();
  for (int i = 0; i < 36; ++i)
    layer_types.push_back(i % 2 ? "full_attention" : "sliding_attention");
  json j = json::parse(R"({
    "architectures": ["GptOssForCausalLM"], "attention_bias": true, "attention_dropout": 0.0,
    "eos_token_id": 200002, "experts_per_token": 4, "head_dim": 64, "hidden_act": "silu",
    "hidden_size": 2880, "initial_context_length": 4096, "initializer_range": 0.02,
    "intermediate_size": 2880, "max_position_embeddings": 131072, "model_type": "gpt_oss",
    "num_attention_heads": 64, "num_experts_per_tok": 4, "num_hidden_layers": 36,
    "num_key_value_heads": 8, "num_local_experts": 128, "output_router_logits": false,
    "pad_token_id": 199999,
    "quantization_config": {"modules_to_not_convert": ["model.layers.*.self_attn",
      "model.layers.*.mlp.router", "model.embed_tokens", "lm_head"], "quant_method": "mxfp4"},
    "rms_norm_eps": 1e-05,
    "rope_scaling": {"beta_fast": 32.0, "beta_slow": 1.0, "factor": 32.0,
      "original_max_position_embeddings": 4096, "rope_type": "yarn", "truncate": false},
    "rope_theta": 150000, "router_aux_loss_coef": 0.9, "sliding_window": 128,
    "swiglu_limit": 7.0, "tie_word_embeddings": false, "transformers_version": "4.55.0.dev0",
    "use_cache": true, "vocab_size": 201088})");
  j["layer_types"] = layer_types;
  return j;
}

Result<ModelConfig> parse(const json& j) {
  return parse_config_json(j.dump(), "cfg/config.json");
}

// Asserts that parsing fails and that the message names the file and `needle` (the field).
void expect_error(const json& j, const std::string& needle) {
  auto r = parse(j);
  ASSERT_FALSE(r.ok()) << "expected an error mentioning " << needle;
  const std::string& m = r.status().message();
  EXPECT_NE(m.find("cfg/config.json"), std::string::npos) << m;
  EXPECT_NE(m.find(needle), std::string::npos) << m;
}

TEST(Config, Real120b) {
  auto r = parse(real_120b());
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  const ModelConfig& c = *r;
  EXPECT_EQ(c.hidden_size, 2880);
  EXPECT_EQ(c.intermediate_size, 2880);
  EXPECT_EQ(c.num_hidden_layers, 36);
  EXPECT_EQ(c.num_attention_heads, 64);
  EXPECT_EQ(c.num_key_value_heads, 8);
  EXPECT_EQ(c.head_dim, 64);
  EXPECT_EQ(c.num_local_experts, 128);
  EXPECT_EQ(c.experts_per_token, 4);
  EXPECT_EQ(c.vocab_size, 201088);
  EXPECT_EQ(c.sliding_window, 128);
  EXPECT_EQ(c.rope_theta, 150000.0);
  EXPECT_EQ(c.rope_scaling.rope_type, "yarn");
  EXPECT_EQ(c.rope_scaling.factor, 32.0);
  EXPECT_EQ(c.rope_scaling.beta_fast, 32.0);
  EXPECT_EQ(c.rope_scaling.beta_slow, 1.0);
  EXPECT_EQ(c.rope_scaling.original_max_position_embeddings, 4096);
  EXPECT_FALSE(c.rope_scaling.truncate);
  EXPECT_EQ(c.swiglu_limit, 7.0);
  EXPECT_EQ(c.rms_norm_eps, 1e-5);
  ASSERT_EQ(c.eos_token_ids.size(), 1u);
  EXPECT_EQ(c.eos_token_ids[0], 200002);
  EXPECT_EQ(c.pad_token_id, 199999);
  EXPECT_EQ(c.max_position_embeddings, 131072);
  EXPECT_EQ(c.initial_context_length, 4096);
  EXPECT_FALSE(c.tie_word_embeddings);
  EXPECT_TRUE(c.attention_bias);
  EXPECT_EQ(c.expert_format, ExpertFormat::kMxfp4);
  ASSERT_EQ(c.layer_types.size(), 36u);
  EXPECT_EQ(c.layer_types[0], LayerType::kSlidingAttention);
  EXPECT_EQ(c.layer_types[35], LayerType::kFullAttention);
}

TEST(Config, Real20b) {
  json j = real_120b();
  j["num_hidden_layers"] = 24;
  j["num_local_experts"] = 32;
  j.erase("layer_types");  // absent: HF default alternates, sliding first
  auto r = parse(j);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->num_hidden_layers, 24);
  EXPECT_EQ(r->num_local_experts, 32);
  ASSERT_EQ(r->layer_types.size(), 24u);
  for (int i = 0; i < 24; ++i) {
    EXPECT_EQ(r->layer_types[i], i % 2 ? LayerType::kFullAttention : LayerType::kSlidingAttention);
  }
}

TEST(Config, OptionalForms) {
  json j = real_120b();
  j.erase("experts_per_token");  // only num_experts_per_tok
  j["eos_token_id"] = {200002, 199999, 200012};
  j["rope_scaling"] = {{"rope_type", "default"}};
  j.erase("quantization_config");
  auto r = parse(j);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->experts_per_token, 4);
  EXPECT_EQ(r->eos_token_ids, (std::vector<int64_t>{200002, 199999, 200012}));
  EXPECT_EQ(r->rope_scaling.rope_type, "none");
  EXPECT_EQ(r->expert_format, ExpertFormat::kBf16);
}

// Fields a config.json may leave out take GptOssConfig's defaults (transformers 4.55+ / 5.x),
// which are not always the "natural" ones: head_dim 64 rather than hidden / heads (that only when
// written as null), num_key_value_heads 8, sliding_window 128, rms_norm_eps 1e-5, rope_theta
// 150000, top-4.
TEST(Config, AbsentFieldsTakeTransformersDefaults) {
  json j = real_120b();
  j["hidden_size"] = 1024;  // hidden / heads = 16, not 64
  for (const char* k : {"head_dim", "num_key_value_heads", "sliding_window", "rms_norm_eps",
                        "rope_theta", "experts_per_token", "num_experts_per_tok"}) {
    j.erase(k);
  }
  auto r = parse(j);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->head_dim, 64);
  EXPECT_EQ(r->num_key_value_heads, 8);
  EXPECT_EQ(r->sliding_window, 128);
  EXPECT_EQ(r->rms_norm_eps, 1e-5);
  EXPECT_EQ(r->rope_theta, 150000.0);
  EXPECT_EQ(r->experts_per_token, 4);
  j["head_dim"] = nullptr;
  j["num_key_value_heads"] = nullptr;
  r = parse(j);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->head_dim, 16);
  EXPECT_EQ(r->num_key_value_heads, 64);
  j["sliding_window"] = nullptr;  // no window, but layers that slide
  expect_error(j, "sliding_window");
}

// The rope dict as transformers 5 resolves it (see config_rope.cpp).
TEST(Config, RopeResolvedLikeTransformers5) {
  json j = real_120b();
  j["max_position_embeddings"] = 8192;
  for (json empty : {json(nullptr), json::object()}) {  // null / {}: GptOssConfig's default yarn
    j["rope_scaling"] = empty;
    auto r = parse(j);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_EQ(r->rope_scaling.rope_type, "yarn");
    EXPECT_EQ(r->rope_scaling.factor, 32.0);
    EXPECT_EQ(r->rope_scaling.original_max_position_embeddings, 4096);
    EXPECT_FALSE(r->rope_scaling.truncate);
  }
  j["rope_scaling"] = {{"factor", 4.0}};  // no rope_type (nor type): plain RoPE
  EXPECT_EQ(parse(j)->rope_scaling.rope_type, "none");
  j["rope_scaling"] = {{"type", "yarn"}, {"factor", 4.0}, {"beta_fast", 0}, {"truncate", nullptr}};
  auto r = parse(j);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->rope_scaling.rope_type, "yarn");
  EXPECT_EQ(r->rope_scaling.original_max_position_embeddings, 8192);  // max_position_embeddings
  EXPECT_EQ(r->rope_scaling.beta_fast, 32.0);                         // 0 => default
  EXPECT_FALSE(r->rope_scaling.truncate);                             // null => false
  EXPECT_EQ(r->rope_scaling.attention_factor, 0.0);
  j["original_max_position_embeddings"] = 1024;  // a top-level value wins over the dict's
  j["rope_scaling"] = {{"rope_type", "yarn"},
                       {"factor", nullptr},
                       {"mscale", 1.0},
                       {"mscale_all_dim", 0.5},
                       {"original_max_position_embeddings", 2048}};
  r = parse(j);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->rope_scaling.original_max_position_embeddings, 1024);
  EXPECT_EQ(r->rope_scaling.factor, 8.0);  // null: max_position_embeddings / original
  EXPECT_DOUBLE_EQ(r->rope_scaling.attention_factor,
                   (0.1 * std::log(8.0) + 1) / (0.05 * std::log(8.0) + 1));
  j["rope_scaling"]["attention_factor"] = 0.75;
  EXPECT_EQ(parse(j)->rope_scaling.attention_factor, 0.75);
  j["rope_scaling"].erase("factor");  // transformers raises on a yarn dict without factor
  expect_error(j, "rope_scaling.factor");
  j["rope_scaling"] = {{"rope_type", "yarn"}, {"factor", 2.0}, {"partial_rotary_factor", 0.5}};
  expect_error(j, "partial_rotary_factor");
  j["rope_scaling"] = {{"sliding_attention", {{"rope_type", "default"}}}};
  expect_error(j, "rope_scaling.sliding_attention");
  // rope_scaling null with rope_parameters: the latter.
  j["rope_scaling"] = nullptr;
  j["rope_parameters"] = {{"rope_type", "yarn"}, {"factor", 2.0}, {"rope_theta", 1e6}};
  j.erase("rope_theta");
  r = parse(j);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->rope_scaling.factor, 2.0);
  EXPECT_EQ(r->rope_theta, 1e6);
}

// transformers reads a rope_scaling object without "truncate" as truncate=true; so do we.
TEST(Config, RopeTruncateDefaultsLikeTransformers) {
  json j = real_120b();
  j["rope_scaling"].erase("truncate");
  auto r = parse(j);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_TRUE(r->rope_scaling.truncate);
  j.erase("rope_scaling");  // absent altogether: GptOssConfig's default (truncate false)
  auto d = parse(j);
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  EXPECT_FALSE(d->rope_scaling.truncate);
}

// transformers 5.x save_pretrained() writes rope_theta and the yarn fields into rope_parameters,
// omits experts_per_token, writes null token ids and adds swiglu_alpha.
TEST(Config, Transformers5Form) {
  json j = real_120b();
  j.erase("rope_theta");
  j.erase("rope_scaling");
  j.erase("experts_per_token");
  j["pad_token_id"] = nullptr;
  j["eos_token_id"] = nullptr;
  j["swiglu_alpha"] = 1.702;
  j["rope_parameters"] = {{"beta_fast", 16.0},     {"beta_slow", 2.0},
                          {"factor", 8.0},         {"original_max_position_embeddings", 2048},
                          {"rope_theta", 50000.0}, {"rope_type", "yarn"},
                          {"truncate", true}};
  auto r = parse(j);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->rope_theta, 50000.0);
  EXPECT_EQ(r->rope_scaling.rope_type, "yarn");
  EXPECT_EQ(r->rope_scaling.factor, 8.0);
  EXPECT_EQ(r->rope_scaling.beta_fast, 16.0);
  EXPECT_EQ(r->rope_scaling.beta_slow, 2.0);
  EXPECT_EQ(r->rope_scaling.original_max_position_embeddings, 2048);
  EXPECT_TRUE(r->rope_scaling.truncate);
  EXPECT_EQ(r->experts_per_token, 4);
  EXPECT_EQ(r->pad_token_id, -1);
  EXPECT_TRUE(r->eos_token_ids.empty());
  j["rope_parameters"] = {{"rope_type", "default"}, {"rope_theta", 10000}};
  r = parse(j);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->rope_scaling.rope_type, "none");
  EXPECT_EQ(r->rope_theta, 10000.0);
  j["rope_theta"] = 20000;  // both present and disagreeing
  expect_error(j, "rope_theta");
  j.erase("rope_theta");
  j["rope_parameters"].erase("rope_theta");
  EXPECT_EQ(parse(j)->rope_theta, 150000.0);  // GptOssConfig.default_theta
  j["rope_parameters"] = {{"rope_type", "linear"}, {"rope_theta", 10000}};
  expect_error(j, "rope_parameters.rope_type");
  j["rope_parameters"] = {{"rope_type", "default"}, {"rope_theta", 10000}};
  j["swiglu_alpha"] = 1.0;
  expect_error(j, "swiglu_alpha");
}

TEST(Config, Errors) {
  auto with = [](const char* k, json v) {
    json j = real_120b();
    j[k] = std::move(v);
    return j;
  };
  auto without = [](const char* k) {
    json j = real_120b();
    j.erase(k);
    return j;
  };
  expect_error(without("hidden_size"), "hidden_size");
  expect_error(without("vocab_size"), "vocab_size");
  expect_error(with("sliding_window", nullptr), "sliding_window");
  expect_error(with("sliding_window", 0), "sliding_window");
  expect_error(with("hidden_size", "2880"), "hidden_size");
  expect_error(with("hidden_size", 2880.5), "hidden_size");
  expect_error(with("hidden_size", 0), "hidden_size");
  expect_error(with("hidden_size", 2880 + 16), "hidden_size");  // MXFP4 needs % 32
  expect_error(with("intermediate_size", 100), "intermediate_size");
  expect_error(with("num_key_value_heads", 7), "num_key_value_heads");
  expect_error(with("num_hidden_layers", -1), "num_hidden_layers");
  expect_error(with("num_experts_per_tok", 2), "num_experts_per_tok");
  expect_error(with("experts_per_token", 129), "experts_per_token");
  expect_error(with("rms_norm_eps", 0.0), "rms_norm_eps");
  expect_error(with("rms_norm_eps", -1e-5), "rms_norm_eps");
  expect_error(with("rope_theta", "big"), "rope_theta");
  expect_error(with("tie_word_embeddings", 1), "tie_word_embeddings");
  expect_error(with("layer_types", json::array({"sliding_attention"})), "layer_types");
  json lt = real_120b()["layer_types"];
  lt[3] = "global_attention";
  expect_error(with("layer_types", lt), "layer_types[3]");
  expect_error(with("eos_token_id", 999999), "eos_token_id");
  expect_error(with("eos_token_id", json::array({1, "x"})), "eos_token_id[1]");
  expect_error(with("quantization_config", {{"quant_method", "gptq"}}), "quant_method");
  json rs = real_120b()["rope_scaling"];
  rs["factor"] = "32";
  expect_error(with("rope_scaling", rs), "rope_scaling.factor");
  rs = real_120b()["rope_scaling"];
  rs["rope_type"] = "dynamic";
  expect_error(with("rope_scaling", rs), "rope_scaling.rope_type");
  expect_error(with("head_dim", 63), "head_dim");
}

TEST(Config, NotJson) {
  for (const char* text : {"", "{", "[1,2]", "{\"hidden_size\": }", "null"}) {
    auto r = parse_config_json(text, "bad/config.json");
    ASSERT_FALSE(r.ok()) << text;
    EXPECT_NE(r.status().message().find("bad/config.json"), std::string::npos);
  }
}

// Round trip through config_to_json with randomised values: every field must survive.
TEST(Config, RoundTripRandom) {
  const unsigned seed = std::random_device{}();
  std::printf("seed %u\n", seed);
  std::mt19937 rng(seed);
  for (int iter = 0; iter < 50; ++iter) {
    std::uniform_int_distribution<int> small(1, 8);
    ModelConfig c;
    c.num_key_value_heads = small(rng);
    c.num_attention_heads = c.num_key_value_heads * small(rng);
    c.head_dim = 2 * small(rng);
    c.hidden_size = 32 * small(rng);
    c.intermediate_size = 32 * small(rng);
    c.num_hidden_layers = small(rng);
    c.num_local_experts = small(rng);
    c.experts_per_token = std::uniform_int_distribution<int64_t>(1, c.num_local_experts)(rng);
    c.vocab_size = 1000 + small(rng);
    c.sliding_window = small(rng) * 16;
    c.max_position_embeddings = 4096 * small(rng);
    c.initial_context_length = 512 * small(rng);
    c.rope_theta = std::uniform_real_distribution<double>(1e3, 1e6)(rng);
    c.rms_norm_eps = std::uniform_real_distribution<double>(1e-7, 1e-3)(rng);
    c.swiglu_limit = std::uniform_real_distribution<double>(1, 10)(rng);
    if (rng() % 2) c.rope_scaling.rope_type = "none";
    c.rope_scaling.factor = std::uniform_real_distribution<double>(1, 64)(rng);
    c.rope_scaling.truncate = rng() % 2;
    for (int64_t i = 0; i < c.num_hidden_layers; ++i) {
      c.layer_types.push_back(rng() % 2 ? LayerType::kFullAttention : LayerType::kSlidingAttention);
    }
    for (int i = small(rng) % 3; i > 0; --i) c.eos_token_ids.push_back(rng() % c.vocab_size);
    c.pad_token_id = rng() % 2 ? -1 : static_cast<int64_t>(rng() % c.vocab_size);
    c.tie_word_embeddings = rng() % 2;
    c.attention_bias = rng() % 2;
    c.expert_format = rng() % 2 ? ExpertFormat::kMxfp4 : ExpertFormat::kBf16;
    ASSERT_TRUE(c.validate().ok()) << c.validate().ToString();
    auto r = parse_config_json(config_to_json(c), "rt");
    ASSERT_TRUE(r.ok()) << r.status().ToString() << "\n" << config_to_json(c);
    const ModelConfig& d = *r;
    EXPECT_EQ(d.num_attention_heads, c.num_attention_heads);
    EXPECT_EQ(d.num_key_value_heads, c.num_key_value_heads);
    EXPECT_EQ(d.head_dim, c.head_dim);
    EXPECT_EQ(d.hidden_size, c.hidden_size);
    EXPECT_EQ(d.intermediate_size, c.intermediate_size);
    EXPECT_EQ(d.num_hidden_layers, c.num_hidden_layers);
    EXPECT_EQ(d.num_local_experts, c.num_local_experts);
    EXPECT_EQ(d.experts_per_token, c.experts_per_token);
    EXPECT_EQ(d.vocab_size, c.vocab_size);
    EXPECT_EQ(d.sliding_window, c.sliding_window);
    EXPECT_EQ(d.max_position_embeddings, c.max_position_embeddings);
    EXPECT_EQ(d.initial_context_length, c.initial_context_length);
    EXPECT_EQ(d.rope_theta, c.rope_theta);
    EXPECT_EQ(d.rms_norm_eps, c.rms_norm_eps);
    EXPECT_EQ(d.swiglu_limit, c.swiglu_limit);
    EXPECT_EQ(d.rope_scaling.rope_type, c.rope_scaling.rope_type);
    if (c.rope_scaling.rope_type == "yarn") {
      EXPECT_EQ(d.rope_scaling.factor, c.rope_scaling.factor);
      EXPECT_EQ(d.rope_scaling.truncate, c.rope_scaling.truncate);
    }
    EXPECT_EQ(d.layer_types, c.layer_types);
    EXPECT_EQ(d.eos_token_ids, c.eos_token_ids);
    EXPECT_EQ(d.pad_token_id, c.pad_token_id);
    EXPECT_EQ(d.tie_word_embeddings, c.tie_word_embeddings);
    EXPECT_EQ(d.attention_bias, c.attention_bias);
    EXPECT_EQ(d.expert_format, c.expert_format);
  }
}

TEST(Config, LoadFromDirAndMissingFile) {
  const auto dir =
      std::filesystem::temp_directory_path() / ("gs_cfg_" + std::to_string(std::random_device{}()));
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "config.json") << real_120b().dump();
  auto r = load_config(dir.string());
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->num_hidden_layers, 36);
  auto m = load_config((dir / "nope").string());
  ASSERT_FALSE(m.ok());
  EXPECT_NE(m.status().message().find("nope"), std::string::npos);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace gossamer
