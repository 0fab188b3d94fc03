// bind_weights / load_model on tiny gpt-oss checkpoints written byte by byte with the real HF
// tensor names (names and shapes spelled out here from the HF layout, not from weights.cpp).
#include "model/weights.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <initializer_list>
#include <map>

#include "model/safetensors.h"
#include "model/st_test_util.h"

namespace gossamer {
namespace {

using nlohmann::json;
using testing::st_file;
using testing::StTensor;
using testing::TempDir;

ModelConfig tiny_config() {
  ModelConfig c;
  c.vocab_size = 64;
  c.hidden_size = 64;
  c.intermediate_size = 32;
  c.num_hidden_layers = 2;
  c.num_attention_heads = 4;
  c.num_key_value_heads = 2;
  c.head_dim = 16;
  c.num_local_experts = 4;
  c.experts_per_token = 2;
  c.sliding_window = 8;
  c.max_position_embeddings = 4096;
  c.initial_context_length = 4096;
  c.rope_theta = 150000;
  c.rms_norm_eps = 1e-5;
  c.swiglu_limit = 7;
  c.layer_types = {LayerType::kSlidingAttention, LayerType::kFullAttention};
  c.eos_token_ids = {3};
  c.expert_format = ExpertFormat::kMxfp4;
  return c;
}

int64_t elem_size(const std::string& dt) {
  return dt == "U8" ? 1 : dt == "F32" ? 4 : 2;
}

// n random bytes of a tensor of dtype dt: float elements below 2 in magnitude (bit 6 of the top
// byte cleared: no NaN / inf, which the loader rejects), E8M0 scales other than 0xFF (NaN).
std::string random_values(const std::string& name, const std::string& dt, int64_t n,
                          std::mt19937& rng) {
  std::string b = testing::random_bytes(static_cast<size_t>(n), rng);
  const int64_t es = elem_size(dt);
  if (dt != "U8") {
    for (int64_t i = es - 1; i < n; i += es) b[i] = static_cast<char>(b[i] & ~0x40);
  } else if (name.size() > 7 && name.compare(name.size() - 7, 7, "_scales") == 0) {
    for (char& c : b) c = static_cast<char>(static_cast<uint8_t>(c) == 0xff ? 0xfe : c);
  }
  return b;
}

// Every tensor of a gpt-oss checkpoint for `c`, random contents. mxfp4 picks the expert layout.
std::map<std::string, StTensor> checkpoint(const ModelConfig& c, bool mxfp4, std::mt19937& rng) {
  const int64_t V = c.vocab_size, H = c.hidden_size, I = c.intermediate_size;
  const int64_t E = c.num_local_experts, Q = c.num_attention_heads * c.head_dim;
  const int64_t KV = c.num_key_value_heads * c.head_dim, NH = c.num_attention_heads;
  std::map<std::string, StTensor> out;
  auto add = [&](const std::string& name, const std::string& dt, std::vector<int64_t> shape) {
    int64_t n = elem_size(dt);
    for (int64_t d : shape) n *= d;
    out[name] = StTensor{name, dt, shape, random_values(name, dt, n, rng)};
  };
  add("model.embed_tokens.weight", "BF16", {V, H});
  add("model.norm.weight", "BF16", {H});
  add("lm_head.weight", "BF16", {V, H});
  for (int64_t i = 0; i < c.num_hidden_layers; ++i) {
    const std::string p = "model.layers." + std::to_string(i) + ".";
    add(p + "input_layernorm.weight", "BF16", {H});
    add(p + "post_attention_layernorm.weight", "BF16", {H});
    add(p + "self_attn.q_proj.weight", "BF16", {Q, H});
    add(p + "self_attn.q_proj.bias", "BF16", {Q});
    add(p + "self_attn.k_proj.weight", "BF16", {KV, H});
    add(p + "self_attn.k_proj.bias", "BF16", {KV});
    add(p + "self_attn.v_proj.weight", "BF16", {KV, H});
    add(p + "self_attn.v_proj.bias", "BF16", {KV});
    add(p + "self_attn.o_proj.weight", "BF16", {H, Q});
    add(p + "self_attn.o_proj.bias", "BF16", {H});
    add(p + "self_attn.sinks", "BF16", {NH});
    add(p + "mlp.router.weight", "BF16", {E, H});
    add(p + "mlp.router.bias", "BF16", {E});
    const std::string x = p + "mlp.experts.";
    if (mxfp4) {
      add(x + "gate_up_proj_blocks", "U8", {E, 2 * I, H / 32, 16});
      add(x + "gate_up_proj_scales", "U8", {E, 2 * I, H / 32});
      add(x + "down_proj_blocks", "U8", {E, H, I / 32, 16});
      add(x + "down_proj_scales", "U8", {E, H, I / 32});
    } else {
      add(x + "gate_up_proj", "BF16", {E, H, 2 * I});
      add(x + "down_proj", "BF16", {E, I, H});
    }
    add(x + "gate_up_proj_bias", "BF16", {E, 2 * I});
    add(x + "down_proj_bias", "BF16", {E, H});
  }
  return out;
}

std::vector<StTensor> values(const std::map<std::string, StTensor>& m) {
  std::vector<StTensor> v;
  for (const auto& kv : m) v.push_back(kv.second);
  return v;
}

// Writes config.json + model.safetensors.
void write_model(const TempDir& dir, const ModelConfig& c,
                 const std::map<std::string, StTensor>& ts) {
  dir.write("config.json", config_to_json(c));
  dir.write("model.safetensors", st_file(values(ts)));
}

void expect_same(const TensorRef& r, const StTensor& t) {
  ASSERT_NE(r.data, nullptr) << t.name;
  EXPECT_EQ(r.shape, t.shape) << t.name;
  EXPECT_EQ(0, std::memcmp(r.data, t.bytes.data(), t.bytes.size())) << t.name;
}

template <class T>
void expect_error(const Result<T>& r, std::initializer_list<std::string> needles) {
  ASSERT_FALSE(r.ok()) << "expected an error mentioning " << *needles.begin();
  for (const std::string& n : needles) {
    EXPECT_NE(r.status().message().find(n), std::string::npos) << r.status().message();
  }
}

void check_layers(const ModelWeights& w, const std::map<std::string, StTensor>& ts, bool mxfp4) {
  for (size_t i = 0; i < w.layers.size(); ++i) {
    const std::string p = "model.layers." + std::to_string(i) + ".";
    const LayerWeights& L = w.layers[i];
    expect_same(L.attn_norm, ts.at(p + "input_layernorm.weight"));
    expect_same(L.mlp_norm, ts.at(p + "post_attention_layernorm.weight"));
    expect_same(L.q_w, ts.at(p + "self_attn.q_proj.weight"));
    expect_same(L.q_b, ts.at(p + "self_attn.q_proj.bias"));
    expect_same(L.k_w, ts.at(p + "self_attn.k_proj.weight"));
    expect_same(L.v_b, ts.at(p + "self_attn.v_proj.bias"));
    expect_same(L.o_w, ts.at(p + "self_attn.o_proj.weight"));
    expect_same(L.o_b, ts.at(p + "self_attn.o_proj.bias"));
    expect_same(L.sinks, ts.at(p + "self_attn.sinks"));
    expect_same(L.router_w, ts.at(p + "mlp.router.weight"));
    expect_same(L.router_b, ts.at(p + "mlp.router.bias"));
    expect_same(L.gate_up_b, ts.at(p + "mlp.experts.gate_up_proj_bias"));
    expect_same(L.down_b, ts.at(p + "mlp.experts.down_proj_bias"));
    EXPECT_EQ(L.gate_up.rows, 2 * 32);
    EXPECT_EQ(L.gate_up.cols, 64);
    EXPECT_EQ(L.down.rows, 64);
    EXPECT_EQ(L.down.cols, 32);
    if (mxfp4) {
      EXPECT_EQ(L.gate_up.format, ExpertFormat::kMxfp4);
      expect_same(L.gate_up.blocks, ts.at(p + "mlp.experts.gate_up_proj_blocks"));
      expect_same(L.gate_up.scales, ts.at(p + "mlp.experts.gate_up_proj_scales"));
      expect_same(L.down.blocks, ts.at(p + "mlp.experts.down_proj_blocks"));
      expect_same(L.down.scales, ts.at(p + "mlp.experts.down_proj_scales"));
    } else {
      EXPECT_EQ(L.down.format, ExpertFormat::kBf16);
      expect_same(L.gate_up.dense, ts.at(p + "mlp.experts.gate_up_proj"));
      expect_same(L.down.dense, ts.at(p + "mlp.experts.down_proj"));
    }
  }
}

TEST(Weights, LoadMxfp4Single) {
  auto rng = testing::seeded_rng("LoadMxfp4Single");
  const ModelConfig c = tiny_config();
  const auto ts = checkpoint(c, true, rng);
  TempDir dir;
  write_model(dir, c, ts);
  auto m = load_model(dir.str());
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  const ModelWeights& w = (*m)->weights;
  EXPECT_EQ((*m)->config.expert_format, ExpertFormat::kMxfp4);
  expect_same(w.embed, ts.at("model.embed_tokens.weight"));
  expect_same(w.final_norm, ts.at("model.norm.weight"));
  expect_same(w.lm_head, ts.at("lm_head.weight"));
  ASSERT_EQ(w.layers.size(), 2u);
  check_layers(w, ts, true);
}

TEST(Weights, LoadBf16ShardedEvenIfConfigSaysMxfp4) {
  auto rng = testing::seeded_rng("LoadBf16Sharded");
  const ModelConfig c = tiny_config();  // config says mxfp4, tensors are dequantized bf16
  const auto ts = checkpoint(c, false, rng);
  TempDir dir;
  dir.write("config.json", config_to_json(c));
  std::vector<StTensor> a, b;
  json map;
  for (const auto& [name, t] : ts) {
    const bool first = name.find("layers.1.") == std::string::npos;
    (first ? a : b).push_back(t);
    map[name] = first ? "model-00001-of-00002.safetensors" : "model-00002-of-00002.safetensors";
  }
  dir.write("model-00001-of-00002.safetensors", st_file(a));
  dir.write("model-00002-of-00002.safetensors", st_file(b));
  dir.write("model.safetensors.index.json", json({{"weight_map", map}}).dump());
  auto m = load_model(dir.str());
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_EQ((*m)->config.expert_format, ExpertFormat::kBf16);
  check_layers((*m)->weights, ts, false);
}

TEST(Weights, TiedEmbeddingsAndOptionalBias) {
  auto rng = testing::seeded_rng("TiedEmbeddings");
  ModelConfig c = tiny_config();
  c.tie_word_embeddings = true;
  c.attention_bias = false;
  auto ts = checkpoint(c, true, rng);
  ts.erase("lm_head.weight");
  for (const char* b : {"q_proj.bias", "k_proj.bias", "v_proj.bias", "o_proj.bias"}) {
    ts.erase(std::string("model.layers.0.self_attn.") + b);
  }
  // Sinks may be f32.
  ts["model.layers.0.self_attn.sinks"] =
      StTensor{"model.layers.0.self_attn.sinks", "F32", {4}, random_values("", "F32", 16, rng)};
  TempDir dir;
  write_model(dir, c, ts);
  auto m = load_model(dir.str());
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  const ModelWeights& w = (*m)->weights;
  EXPECT_EQ(w.lm_head.data, w.embed.data);
  EXPECT_EQ(w.layers[0].q_b.data, nullptr);
  // Layer 1 still has its biases: not bound either (transformers ignores them when
  // attention_bias is false; a consumer binding them would compute something else).
  ASSERT_TRUE((*m)->store->contains("model.layers.1.self_attn.q_proj.bias"));
  EXPECT_EQ(w.layers[1].q_b.data, nullptr);
  EXPECT_EQ(w.layers[1].o_b.data, nullptr);
  EXPECT_EQ(w.layers[0].sinks.dtype, DType::kF32);
}

// save_pretrained of a float16 / float32 model writes F16 / F32 tensors: they bind as they are
// (the CPU engine converts them per row; the CUDA uploader refuses non-BF16 with a message).
TEST(Weights, F16AndF32TensorsBind) {
  auto rng = testing::seeded_rng("F16AndF32TensorsBind");
  const ModelConfig c = tiny_config();
  auto ts = checkpoint(c, false, rng);
  std::uniform_int_distribution<int> pick(0, 2);
  std::map<std::string, std::string> chosen;
  for (auto& [name, t] : ts) {
    if (t.dtype != "BF16") continue;
    const std::string dt = std::vector<std::string>{"BF16", "F16", "F32"}[pick(rng)];
    int64_t n = elem_size(dt);
    for (int64_t d : t.shape) n *= d;
    t = StTensor{name, dt, t.shape, random_values(name, dt, n, rng)};
    chosen[name] = dt;
  }
  TempDir dir;
  write_model(dir, c, ts);
  auto m = load_model(dir.str());
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  const ModelWeights& w = (*m)->weights;
  EXPECT_EQ(dtype_name(w.embed.dtype), chosen.at("model.embed_tokens.weight"));
  EXPECT_EQ(dtype_name(w.layers[1].q_w.dtype), chosen.at("model.layers.1.self_attn.q_proj.weight"));
  EXPECT_EQ(dtype_name(w.layers[0].down.dense.dtype),
            chosen.at("model.layers.0.mlp.experts.down_proj"));
  check_layers(w, ts, false);
}

TEST(Weights, F16ToFloat) {
  EXPECT_EQ(f16_to_float(0x3c00), 1.0f);
  EXPECT_EQ(f16_to_float(0xc000), -2.0f);
  EXPECT_EQ(f16_to_float(0x7bff), 65504.0f);
  EXPECT_EQ(f16_to_float(0x0001), std::ldexp(1.0f, -24));  // smallest subnormal
  EXPECT_TRUE(std::isinf(f16_to_float(0x7c00)));
  EXPECT_TRUE(std::isnan(f16_to_float(0x7e00)));
}

// Loads `c` with tensors edited by `edit`; expects an error naming the model file and `needles`.
void expect_load_error(const ModelConfig& c,
                       const std::function<void(std::map<std::string, StTensor>&)>& edit,
                       std::initializer_list<std::string> needles) {
  auto rng = testing::seeded_rng("expect_load_error");
  auto ts = checkpoint(c, true, rng);
  edit(ts);
  TempDir dir;
  write_model(dir, c, ts);
  auto m = load_model(dir.str());
  expect_error(m, {dir.path("model.safetensors")});
  expect_error(m, needles);
}

TEST(Weights, Errors) {
  const ModelConfig c = tiny_config();
  const std::string p = "model.layers.1.";
  expect_load_error(c, [&](auto& ts) { ts.erase(p + "self_attn.k_proj.bias"); },
                    {"'" + p + "self_attn.k_proj.bias'", "not found", "BF16|F16|F32 [32]"});
  expect_load_error(c, [&](auto& ts) { ts.erase("lm_head.weight"); },
                    {"'lm_head.weight'", "not found"});
  expect_load_error(c,
                    [&](auto& ts) {
                      // Same byte count, wrong shape (expected [hidden, heads*head_dim] = [64,
                      // 64]).
                      ts.at(p + "self_attn.o_proj.weight").shape = {32, 128};
                    },
                    {"'" + p + "self_attn.o_proj.weight'", "expected BF16|F16|F32 [64, 64]",
                     "found BF16 [32, 128]"});
  expect_load_error(
      c,
      [&](auto& ts) {
        StTensor& t = ts.at(p + "mlp.router.weight");
        t.dtype = "I16";
      },
      {"'" + p + "mlp.router.weight'", "expected BF16|F16|F32 [4, 64]", "found I16 [4, 64]"});
  expect_load_error(
      c,
      [&](auto& ts) {
        StTensor& t = ts.at(p + "mlp.experts.down_proj_scales");
        t.dtype = "I8";
      },
      {"'" + p + "mlp.experts.down_proj_scales'", "expected U8 [4, 64, 1]", "found I8"});
  expect_load_error(c,
                    [&](auto& ts) {
                      const std::string n = "model.layers.2.input_layernorm.weight";
                      ts[n] = StTensor{n, "BF16", {64}, std::string(128, '\0')};
                    },
                    {"model.layers.2.input_layernorm.weight", "num_hidden_layers = 2"});
}

// OpenAI's own layout is bound under its own names (weights_original.cpp; whole checkpoints:
// tests/python/test_original_layout.py): a missing tensor is named as that layout calls it.
TEST(Weights, OriginalLayoutNamesItsMissingTensor) {
  TempDir dir;
  const ModelConfig c = tiny_config();
  dir.write("config.json", config_to_json(c));
  const int64_t v = c.vocab_size, h = c.hidden_size;
  dir.write("model.safetensors", st_file({{"embedding.weight",
                                           "BF16",
                                           {v, h},
                                           std::string(static_cast<size_t>(v * h * 2), '\0')}}));
  expect_error(load_model(dir.str()),
               {dir.path("model.safetensors"), "'block.0.attn.norm.scale'", "not found"});
  ModelConfig bf16 = c;  // a config without quantization_config: experts declared dequantized
  bf16.expert_format = ExpertFormat::kBf16;
  dir.write("config.json", config_to_json(bf16));
  expect_error(load_model(dir.str()), {dir.path("model.safetensors"), "original", "dequantized"});
}

TEST(Weights, MisalignedTensorRejected) {
  const ModelConfig c = tiny_config();
  // st_file pads the header to 8 bytes and lays tensors out in name order: the 1-byte tensor
  // "a" comes first, so every following tensor starts at an odd file offset.
  expect_load_error(c,
                    [](auto& ts) {
                      ts["a"] = StTensor{"a", "U8", {1}, "x"};
                    },
                    {"not aligned to 2 bytes"});
}

TEST(Weights, BadConfigNamesFile) {
  TempDir dir;
  json j = json::parse(config_to_json(tiny_config()));
  j.erase("num_attention_heads");
  dir.write("config.json", j.dump());
  auto m = load_model(dir.str());
  expect_error(m, {dir.path("config.json"), "num_attention_heads", "missing"});
  TempDir nothing;
  expect_error(load_model(nothing.str()), {"config.json"});
}

}  // namespace
}  // namespace gossamer
