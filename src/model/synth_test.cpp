// Tests for presets, the streaming safetensors writer and `synth` checkpoints. Checkpoints are
// read back with the independent TensorStore reader and bound with bind_weights. The MXFP4
// expert values are checked in synth_mxfp4_test.cpp.
#include "model/synth.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "common/test_seed.h"
#include "model/config.h"
#include "model/safetensors.h"
#include "model/safetensors_writer.h"
#include "model/st_test_util.h"
#include "model/synth_test_util.h"
#include "model/weights.h"

namespace gossamer {
namespace {

namespace fs = std::filesystem;
using synthtest::small_config;
using synthtest::synth_to;
using synthtest::tensor_bytes;
using testing::fresh_seed;
using testing::TempDir;

std::string read_file(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

TEST(Presets, RealConfigs) {
  const ModelConfig c = preset_config("120b").value();
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
  EXPECT_EQ(c.rope_scaling.factor, 32.0);
  EXPECT_EQ(c.rope_scaling.original_max_position_embeddings, 4096);
  EXPECT_EQ(c.rope_scaling.beta_fast, 32.0);
  EXPECT_EQ(c.rope_scaling.beta_slow, 1.0);
  EXPECT_FALSE(c.rope_scaling.truncate);
  EXPECT_EQ(c.swiglu_limit, 7.0);
  EXPECT_EQ(c.rms_norm_eps, 1e-5);
  EXPECT_EQ(c.eos_token_ids, std::vector<int64_t>{200002});
  EXPECT_EQ(c.pad_token_id, 199999);
  EXPECT_EQ(c.max_position_embeddings, 131072);
  EXPECT_EQ(c.initial_context_length, 4096);
  EXPECT_FALSE(c.tie_word_embeddings);
  ASSERT_EQ(c.layer_types.size(), 36u);
  EXPECT_EQ(c.layer_types[0], LayerType::kSlidingAttention);
  EXPECT_EQ(c.layer_types[1], LayerType::kFullAttention);
  EXPECT_EQ(c.layer_types[35], LayerType::kFullAttention);
  const ModelConfig b = preset_config("20b").value();
  EXPECT_EQ(b.num_hidden_layers, 24);
  EXPECT_EQ(b.num_local_experts, 32);
  EXPECT_EQ(b.layer_types.size(), 24u);
  for (const char* n : {"tiny", "20b", "120b"}) {
    EXPECT_TRUE(preset_config(n)->validate().ok()) << n;
  }
  EXPECT_EQ(preset_config("tiny")->vocab_size, 201088);  // works with the real tokenizer
  const auto bad = preset_config("7b");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), StatusCode::kNotFound);
  EXPECT_NE(bad.status().message().find("7b"), std::string::npos);
}

TEST(SafetensorsWriter, PlanShardsGreedy) {
  std::vector<TensorSpec> t = {{"a", DType::kU8, {60}},
                               {"b", DType::kBF16, {20}},  // 40 bytes
                               {"c", DType::kU8, {150}},   // larger than the limit: alone
                               {"d", DType::kU8, {10}}};
  const ShardPlan p = plan_shards(t, 100).value();
  ASSERT_EQ(p.items.size(), 3u);
  EXPECT_EQ(p.items[0], (std::vector<size_t>{0, 1}));
  EXPECT_EQ(p.items[1], (std::vector<size_t>{2}));
  EXPECT_EQ(p.items[2], (std::vector<size_t>{3}));
  EXPECT_EQ(p.file_names[0], "model-00001-of-00003.safetensors");
  EXPECT_EQ(p.file_names[2], "model-00003-of-00003.safetensors");
  EXPECT_EQ(p.total_bytes, 260);
  const ShardPlan one = plan_shards(t, 1000).value();
  ASSERT_EQ(one.file_names.size(), 1u);
  EXPECT_EQ(one.file_names[0], "model.safetensors");
  EXPECT_FALSE(plan_shards(t, 0).ok());
  t.push_back({"neg", DType::kU8, {-1}});
  EXPECT_FALSE(plan_shards(t, 1000).ok());
}

TEST(SafetensorsWriter, RoundTripAndMisuse) {
  TempDir dir;
  const std::string path = (dir / "x.safetensors").string();
  {
    auto w = SafetensorsFileWriter::open(path, {{"a", DType::kU8, {3}}, {"b", DType::kBF16, {2}}},
                                         {{"format", "pt"}});
    ASSERT_TRUE(w.ok()) << w.status().ToString();
    ASSERT_TRUE(w->append("\x01\x02", 2).ok());
    ASSERT_TRUE(w->append("\x03\x80\x3f\x00\x40", 5).ok());
    const Status over = w->append("z", 1);
    EXPECT_FALSE(over.ok());
    EXPECT_NE(over.message().find("exceeds"), std::string::npos) << over.message();
    ASSERT_TRUE(w->finish().ok());
  }
  const auto st = TensorStore::open_file(path);
  ASSERT_TRUE(st.ok()) << st.status().ToString();
  EXPECT_EQ(tensor_bytes(**st, "a"), std::string("\x01\x02\x03", 3));
  EXPECT_EQ((*st)->get("b")->get(0), 1.0f);  // 0x3f80
  EXPECT_EQ((*st)->get("b")->get(1), 2.0f);  // 0x4000
  EXPECT_EQ((*st)->metadata(0).at("format"), "pt");
  // Short write: finish fails and nothing (not even the .partial) is left behind.
  const std::string short_path = (dir / "short.safetensors").string();
  {
    auto w = SafetensorsFileWriter::open(short_path, {{"a", DType::kU8, {4}}}, {});
    ASSERT_TRUE(w.ok());
    ASSERT_TRUE(w->append("ab", 2).ok());
    const Status s = w->finish();
    EXPECT_FALSE(s.ok());
    EXPECT_NE(s.message().find("2 of 4"), std::string::npos) << s.message();
  }
  EXPECT_FALSE(fs::exists(short_path));
  EXPECT_FALSE(fs::exists(short_path + ".partial"));
  EXPECT_FALSE(SafetensorsFileWriter::open((dir / "d.safetensors").string(),
                                           {{"a", DType::kU8, {1}}, {"a", DType::kU8, {1}}}, {})
                   .ok());
  EXPECT_FALSE(
      SafetensorsFileWriter::open((dir / "no/such/dir/x").string(), {{"a", DType::kU8, {1}}}, {})
          .ok());
}

// The expected tensor names of a config, written out from the layout contract (weights.h).
std::set<std::string> expected_names(const ModelConfig& c) {
  std::set<std::string> n = {"model.embed_tokens.weight", "model.norm.weight", "lm_head.weight"};
  for (int64_t l = 0; l < c.num_hidden_layers; ++l) {
    const std::string p = "model.layers." + std::to_string(l) + ".";
    for (const char* s :
         {"input_layernorm.weight", "post_attention_layernorm.weight", "self_attn.q_proj.weight",
          "self_attn.q_proj.bias", "self_attn.k_proj.weight", "self_attn.k_proj.bias",
          "self_attn.v_proj.weight", "self_attn.v_proj.bias", "self_attn.o_proj.weight",
          "self_attn.o_proj.bias", "self_attn.sinks", "mlp.router.weight", "mlp.router.bias",
          "mlp.experts.gate_up_proj_bias", "mlp.experts.down_proj_bias"}) {
      n.insert(p + s);
    }
    if (c.expert_format == ExpertFormat::kMxfp4) {
      for (const char* s :
           {"gate_up_proj_blocks", "gate_up_proj_scales", "down_proj_blocks", "down_proj_scales"}) {
        n.insert(p + "mlp.experts." + s);
      }
    } else {
      n.insert(p + "mlp.experts.gate_up_proj");
      n.insert(p + "mlp.experts.down_proj");
    }
  }
  return n;
}

TEST(Synth, ShardedCheckpointReadsBack) {
  TempDir dir;
  const ModelConfig cfg = small_config(ExpertFormat::kMxfp4);
  ASSERT_TRUE(synth_to(dir / "m", cfg, fresh_seed("synth"), 200000, 4096, 2).ok());
  // Index: total_size and the weight map agree with the files the reader finds.
  const auto index = nlohmann::json::parse(read_file(dir / "m/model.safetensors.index.json"));
  const auto store = TensorStore::open_dir((dir / "m").string());
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  const std::set<std::string> want = expected_names(cfg);
  const std::vector<std::string> names = (*store)->names();
  EXPECT_EQ(std::set<std::string>(names.begin(), names.end()), want);
  EXPECT_EQ(index["weight_map"].size(), want.size());
  int64_t total = 0;
  std::set<std::string> files;
  for (const std::string& n : names) {
    const TensorRef r = (*store)->get(n).value();
    total += r.numel() * dtype_size(r.dtype);
    const std::string file = fs::path((*store)->file_of(n)).filename().string();
    EXPECT_EQ(index["weight_map"][n].get<std::string>(), file) << n;
    files.insert(file);
  }
  EXPECT_EQ(index["metadata"]["total_size"].get<int64_t>(), total);
  ASSERT_GT(files.size(), 2u);
  const std::string last = "-of-" + std::string(5 - std::to_string(files.size()).size(), '0') +
                           std::to_string(files.size()) + ".safetensors";
  for (const std::string& f : files) EXPECT_TRUE(f.ends_with(last)) << f;
  // Shapes and dtypes against weights.h, via the independent binder.
  const auto model = load_model((dir / "m").string());
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  const LayerWeights& l0 = (*model)->weights.layers[0];
  EXPECT_EQ(l0.gate_up.blocks.shape, (std::vector<int64_t>{4, 128, 2, 16}));
  EXPECT_EQ(l0.gate_up.scales.shape, (std::vector<int64_t>{4, 128, 2}));
  EXPECT_EQ(l0.down.blocks.shape, (std::vector<int64_t>{4, 64, 2, 16}));
  EXPECT_EQ(l0.q_w.shape, (std::vector<int64_t>{64, 64}));
  EXPECT_EQ(l0.k_w.shape, (std::vector<int64_t>{32, 64}));
  EXPECT_EQ(l0.sinks.shape, (std::vector<int64_t>{4}));
  EXPECT_EQ(l0.gate_up.blocks.dtype, DType::kU8);
  EXPECT_EQ((*model)->weights.embed.shape, (std::vector<int64_t>{1000, 64}));
  // config.json round-trips through the independent parser.
  const ModelConfig back = load_config((dir / "m").string()).value();
  EXPECT_EQ(back.num_hidden_layers, 3);
  EXPECT_EQ(back.expert_format, ExpertFormat::kMxfp4);
}

TEST(Synth, DeterministicAcrossShardsChunksThreads) {
  TempDir dir;
  const uint64_t seed = fresh_seed("synth");
  const ModelConfig cfg = small_config(ExpertFormat::kMxfp4);
  ASSERT_TRUE(synth_to(dir / "a", cfg, seed, int64_t{1} << 30, 8 << 20, 2).ok());
  ASSERT_TRUE(synth_to(dir / "b", cfg, seed, 150000, 999, 1).ok());  // odd chunk, many shards
  ASSERT_TRUE(synth_to(dir / "c", cfg, seed + 1, int64_t{1} << 30, 8 << 20, 2).ok());
  EXPECT_TRUE(fs::exists(dir / "a/model.safetensors"));
  EXPECT_FALSE(fs::exists(dir / "a/model.safetensors.index.json"));
  EXPECT_TRUE(fs::exists(dir / "b/model.safetensors.index.json"));
  const auto a = TensorStore::open_dir((dir / "a").string()).value();
  const auto b = TensorStore::open_dir((dir / "b").string()).value();
  const auto c = TensorStore::open_dir((dir / "c").string()).value();
  ASSERT_EQ(a->names(), b->names());
  int differ = 0;
  for (const std::string& n : a->names()) {
    EXPECT_EQ(tensor_bytes(*a, n), tensor_bytes(*b, n)) << n;
    differ += tensor_bytes(*a, n) != tensor_bytes(*c, n);
  }
  EXPECT_EQ(differ, static_cast<int>(a->names().size())) << "another seed must change every tensor";
  // Rewriting into an existing directory with one shard removes the stale shards and index.
  ASSERT_TRUE(synth_to(dir / "b", cfg, seed, int64_t{1} << 30, 8 << 20, 2).ok());
  EXPECT_FALSE(fs::exists(dir / "b/model.safetensors.index.json"));
  EXPECT_TRUE(fs::exists(dir / "b/model.safetensors"));
  EXPECT_EQ(TensorStore::open_dir((dir / "b").string()).value()->names(), a->names());
}

TEST(Synth, BadOptionsNameTheProblem) {
  TempDir dir;
  SynthOptions o;
  o.config = small_config(ExpertFormat::kMxfp4);
  o.out_dir = (dir / "m").string();
  o.shard_bytes = 0;
  EXPECT_NE(write_synth_checkpoint(o).message().find("shard size"), std::string::npos);
  o.shard_bytes = 1 << 20;
  o.tokenizer_path = (dir / "missing.json").string();
  const Status t = write_synth_checkpoint(o);
  EXPECT_EQ(t.code(), StatusCode::kNotFound);
  EXPECT_NE(t.message().find("missing.json"), std::string::npos);
  EXPECT_FALSE(fs::exists(dir / "m/model.safetensors"));  // checked before writing anything
  o.tokenizer_path.clear();
  o.config.num_key_value_heads = 3;  // 4 heads not a multiple of 3
  EXPECT_NE(write_synth_checkpoint(o).message().find("num_key_value_heads"), std::string::npos);
  o.config = small_config(ExpertFormat::kBf16);
  o.config.hidden_size = 48;
  EXPECT_FALSE(write_synth_checkpoint(o).ok());
  o.config = small_config(ExpertFormat::kMxfp4);
  std::ofstream(dir / "file") << "x";
  o.out_dir = (dir / "file").string();  // a file, not a directory
  const Status d = write_synth_checkpoint(o);
  EXPECT_EQ(d.code(), StatusCode::kIo) << d.ToString();
  // A directory holding a checkpoint synth did not write (a real snapshot) is left alone.
  fs::create_directories(dir / "real");
  std::ofstream(dir / "real/model-00001-of-00002.safetensors") << "precious";
  o.out_dir = (dir / "real").string();
  const Status r = write_synth_checkpoint(o);
  EXPECT_NE(r.message().find("not written by gossamer synth"), std::string::npos) << r.ToString();
  EXPECT_EQ(read_file(dir / "real/model-00001-of-00002.safetensors"), "precious");
}

}  // namespace
}  // namespace gossamer
