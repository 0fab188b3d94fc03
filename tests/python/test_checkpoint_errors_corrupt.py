"""Checkpoint loading: ~150 fixed corrupt checkpoints must fail cleanly, naming the problem.

Each case breaks one thing of a base checkpoint: the safetensors framing (truncations, header
length, JSON, UTF-8, NUL bytes), header entries (dtype, shape, data_offsets), the tensors the
config implies (missing, wrong shape/dtype, MXFP4 scales, extra layers, alignment), the shard
index, config.json, tokenizer.json, and the directory itself (empty, FIFOs, directories where files
belong, not a checkpoint). `inspect` and `run` must exit 1 with an error naming it (check_load).
"""
import json
import os
import struct

import pytest

from ckpt_util import (BLOCKS1, CFG, EMBED, INDEX, QBIAS0, ROUTER0, SCALES0, SH2, SH3, SINKS0,
                       SINKS1, ST, TIMEOUT_S, TOK, H, J, R, cfg, cfg_del, cfg_text, check_load,
                       copy_base, deep, header_len, on_file, pack_tensors, pop, raw_st, reshape,
                       rewrite, seq, set_, split_st, tensors_of, wmap, write)
from conftest import SHARED


# ---- mutations of the fixed cases: each returns a function of the checkpoint directory ----

def replace_by(name, kind):
    """DIR/name replaced by a FIFO or a directory."""
    def op(d):
        if (d / name).exists():
            (d / name).unlink()
        os.mkfifo(d / name) if kind == "fifo" else (d / name).mkdir()
    return op


def entry_text(name, text):
    """Tensor `name`'s header entry replaced by literal JSON text."""
    def op(b):
        header, data = split_st(b)
        header[name] = "@@"
        return raw_st(json.dumps(header).replace('"@@"', text).encode(), data)
    return R(op)


def grow_header(suffix):
    """`suffix` appended inside the header, after the JSON object."""
    return R(lambda b: raw_st(b[8:8 + header_len(b)] + suffix, b[8 + header_len(b):]))


def in_header(old, new):
    return R(lambda b: raw_st(b[8:8 + header_len(b)].replace(old, new, 1), b[8 + header_len(b):]))


def duplicate_key(b):
    header, data = split_st(b)
    entry = json.dumps({SINKS1: header[SINKS1]})[1:-1]
    return raw_st((json.dumps(header)[:-1] + "," + entry + "}").encode(), data)


def shift(entry, delta):
    return H(lambda h: h[entry].update(data_offsets=[x + delta for x in h[entry]["data_offsets"]]))


def overlap(h):
    """SINKS1 moved to start halfway into ROUTER0."""
    b, e = h[ROUTER0]["data_offsets"]
    h[SINKS1]["data_offsets"] = [(b + e) // 2, (b + e) // 2 + 8]


def add_tensor(name, dtype, shape, raw):
    return rewrite(lambda ts: ts + [(name, dtype, shape, raw)])


def mixed_layouts(ts):
    """Layer 1's experts in the bf16 layout while layer 0 is MXFP4."""
    ts = [t for t in ts if not (t[0].startswith("model.layers.1.mlp.experts.")
                                and t[0].endswith(("_blocks", "_scales")))]
    return ts + [("model.layers.1.mlp.experts.gate_up_proj", "BF16", [4, 64, 128], bytes(65536)),
                 ("model.layers.1.mlp.experts.down_proj", "BF16", [4, 64, 64], bytes(32768))]


def duplicate_across_shards(d):
    """A tensor of shard 2 copied into shard 1 as well (the index names shard 2)."""
    name, dtype, shape, raw = tensors_of(d / SH2)[0]
    p1 = d / "model-00001-of-00004.safetensors"
    p1.write_bytes(pack_tensors(tensors_of(p1) + [(name, dtype, shape, raw)]))


def split_no_index(d):
    """Two files (no index, no model.safetensors) that both hold tensor 9."""
    ts = tensors_of(d / ST)
    (d / ST).unlink()
    (d / "a.safetensors").write_bytes(pack_tensors(ts[:10]))
    (d / "b.safetensors").write_bytes(pack_tensors(ts[9:]))


def empty_dir(d):
    for p in d.iterdir():
        p.unlink()


def unrelated_dir(d):
    empty_dir(d)
    (d / "README.md").write_text("not a checkpoint\n")
    (d / "weights.bin").write_bytes(os.urandom(1000))


def truncated_tokenizer(d):
    real = (SHARED / "tokenizer" / TOK).read_bytes()
    (d / TOK).write_bytes(real[:len(real) * 2 // 3])


# ---- the fixed corruption cases: (name, mutation, substrings the error must contain, options)
# options: base ("mx" or "sharded"), which (commands; default inspect and run), timeout, xfail.

S, TOKCMDS = {"base": "sharded"}, {"which": ("prompt", "run")}
NOT_REG = "not a regular file"
CASES = [
    # safetensors framing
    ("empty_file", write(ST, b""), [ST, "0 bytes", "too short"]),
    ("five_bytes", write(ST, b"\1\0\0\0\0"), [ST, "5 bytes"]),
    ("truncated_in_length", R(lambda b: b[:6]), [ST, "6 bytes"]),
    ("truncated_in_header", R(lambda b: b[:8 + header_len(b) // 2]),
     [ST, "header length", "byte offset 0", "past the end"]),
    ("truncated_in_data", R(lambda b: b[:len(b) // 2]),
     [ST, "data_offsets", "past the end of the data region", "file size"]),
    ("truncated_after_header", R(lambda b: b[:8 + header_len(b)]), [ST, "data region"]),
    ("header_len_max", R(lambda b: b"\xff" * 8 + b[8:]), [ST, "header length", "exceeds"]),
    ("header_len_past_eof", R(lambda b: struct.pack("<Q", len(b)) + b[8:]),
     [ST, "header length", "byte offset 0", "past the end of the file"]),
    ("header_len_zero", R(lambda b: struct.pack("<Q", 0) + b[8:]),
     [ST, "byte offset 8", "not a JSON object"]),
    ("header_not_json", write(ST, raw_st(b"{not json}   ")), [ST, "not valid JSON", "byte offset"]),
    ("header_array", write(ST, raw_st(b"[1, 2, 3]")), [ST, "not a JSON object"]),
    ("header_string", write(ST, raw_st(b'"abc"')), [ST, "not a JSON object"]),
    ("header_object_then_garbage", grow_header(b"xyz"), [ST, "not valid JSON", "byte offset"]),
    ("header_nul_padding", grow_header(b"\0" * 8), [ST, "NUL byte", "byte offset"]),
    ("header_nul_then_garbage", grow_header(b"\0garbage"), [ST, "NUL byte", "byte offset"]),
    ("header_invalid_utf8_name", in_header(b"lm_head", b"lm\xffead"),
     [ST, "not valid JSON", "byte offset"]),
    ("header_invalid_utf8_metadata", in_header(b'"pt"', b'"p\xc3"'), [ST, "not valid JSON"]),
    ("header_lone_surrogate", in_header(b'"pt"', b'"\\ud800"'), [ST, "not valid JSON"]),
    ("header_duplicate_key", R(duplicate_key), [ST, SINKS1, "twice"]),
    ("metadata_not_object", H(lambda h: h.update(__metadata__=[1])), [ST, "__metadata__"]),
    ("metadata_value_not_string", H(lambda h: h.update(__metadata__={"a": 1})),
     [ST, "__metadata__", "'a'"]),
    ("entry_not_object", H(lambda h: h.update({SINKS1: 5})), [ST, SINKS1]),
    ("entry_deeply_nested", entry_text(SINKS1, deep()), [ST, SINKS1]),
    # header entries
    ("dtype_missing", pop(SINKS1, "dtype"), [ST, SINKS1, "dtype"]),
    ("dtype_unknown", set_(SINKS1, "dtype", "F4"), [ST, SINKS1, "F4"]),
    ("dtype_lowercase", set_(SINKS1, "dtype", "bf16"), [ST, SINKS1, "bf16"]),
    ("dtype_u16", set_(SINKS1, "dtype", "U16"), [ST, SINKS1, "U16"]),
    ("dtype_not_string", set_(SINKS1, "dtype", 2), [ST, SINKS1, "dtype"]),
    ("dtype_f32_same_bytes", set_(SINKS1, "dtype", "F32"), [ST, SINKS1, "needs 16"]),
    ("shape_missing", pop(SINKS1, "shape"), [ST, SINKS1, "shape"]),
    ("shape_negative", set_(SINKS1, "shape", [-4]), [ST, SINKS1, "-4"]),
    ("shape_float", set_(SINKS1, "shape", [4.5]), [ST, SINKS1, "4.5"]),
    ("shape_string", set_(SINKS1, "shape", ["4"]), [ST, SINKS1, "shape entry \"4\""]),
    ("shape_not_array", set_(SINKS1, "shape", 4), [ST, SINKS1, "shape"]),
    ("shape_overflow", set_(SINKS1, "shape", [2**62, 2**62, 4]), [ST, SINKS1, "overflow"]),
    ("shape_numel_mismatch", set_(SINKS1, "shape", [5]), [ST, SINKS1, "data_offsets", "needs 10"]),
    ("shape_deeply_nested", entry_text(SINKS1, '{"dtype":"BF16","shape":[' + deep() + "],"
                                       '"data_offsets":[0,8]}'), [ST, SINKS1, "shape entry"]),
    ("shape_overflow_then_nested", entry_text(SINKS1, '{"dtype":"BF16","shape":[65536,65536,'
                                              '65536,65536,' + deep() + '],"data_offsets":[0,8]}'),
     [ST, SINKS1, "overflow"]),
    ("offsets_missing", pop(SINKS1, "data_offsets"), [ST, SINKS1, "data_offsets"]),
    ("offsets_reversed", H(lambda h: h[SINKS1]["data_offsets"].reverse()),
     [ST, SINKS1, "end before begin"]),
    ("offsets_past_end", shift(SINKS1, 10**9), [ST, SINKS1, "past the end of the data region",
                                                "file offset"]),
    ("offsets_huge", set_(SINKS1, "data_offsets", [2**64 - 8, 2**64]),
     [ST, SINKS1, "data_offsets"]),
    ("offsets_negative", set_(SINKS1, "data_offsets", [-8, 0]), [ST, SINKS1, "data_offsets"]),
    ("offsets_three", set_(SINKS1, "data_offsets", [0, 8, 16]), [ST, SINKS1, "data_offsets"]),
    ("offsets_float", set_(SINKS1, "data_offsets", [0.0, 8.0]), [ST, SINKS1, "data_offsets"]),
    ("offsets_overlap", H(overlap), [ST, SINKS1, ROUTER0, "overlap", "byte offset"]),
    ("offsets_same_range", H(lambda h: h[SINKS1].update(data_offsets=h[SINKS0]["data_offsets"])),
     [ST, "overlap"]),
    # the tensors the config implies
    ("tensor_missing", pop(SINKS1), [SINKS1, "not found", ST]),
    ("embed_missing", pop(EMBED), [EMBED, "not found"]),
    ("lm_head_missing", pop("lm_head.weight"), ["lm_head.weight", "not found"]),
    ("bias_missing_with_attention_bias", pop(QBIAS0), [QBIAS0, "not found"]),
    ("wrong_shape_same_bytes", reshape(ROUTER0, [64, 4]),
     [ROUTER0, ST, "expected", "[4, 64]", "found", "[64, 4]"]),
    ("wrong_rank", reshape(ROUTER0, [256]), [ROUTER0, "[4, 64]", "[256]"]),
    ("wrong_dtype_int", reshape(ROUTER0, [4, 64], "I16"), [ROUTER0, "BF16|F16|F32", "I16"]),
    ("wrong_dtype_u8_for_float", reshape(SINKS1, [8], "U8"), [SINKS1, "U8"]),
    ("mxfp4_scales_wrong_shape", reshape(SCALES0, [4, 256]), [SCALES0, "[4, 128, 2]", "[4, 256]"]),
    ("mxfp4_scales_transposed", reshape(SCALES0, [4, 2, 128]), [SCALES0, "[4, 2, 128]"]),
    ("mxfp4_scales_missing", pop(SCALES0), [SCALES0, "not found"]),
    ("mxfp4_blocks_i8", set_(BLOCKS1, "dtype", "I8"), [BLOCKS1, "U8", "I8"]),
    ("mxfp4_blocks_wrong_shape", reshape(BLOCKS1, [4, 64, 32]), [BLOCKS1, "[4, 64, 2, 16]"]),
    ("mixed_expert_layouts", rewrite(mixed_layouts), ["model.layers.1.mlp.experts", "not found"]),
    ("extra_layer_tensor", add_tensor("model.layers.2.self_attn.sinks", "BF16", [4], bytes(8)),
     ["model.layers.2.self_attn.sinks", "num_hidden_layers"]),
    ("misaligned_tensors", rewrite(lambda ts: [("pad", "U8", [1], b"\0")] + ts, align=1),
     [EMBED, "not aligned", "byte offset"]),
    # OpenAI's own names are bound as that layout (test_original_layout.py): a checkpoint with
    # only its embedding renamed misses the layout's other tensors, named as it calls them.
    ("half_original_openai_layout", H(lambda h: h.update({"embedding.weight": h.pop(EMBED)})),
     ["block.0.attn.norm.scale", "not found"]),
    # config.json
    ("config_missing", lambda d: (d / CFG).unlink(), [CFG], {"which": ("run",)}),
    ("config_empty", write(CFG, ""), [CFG, "not valid JSON"]),
    ("config_not_json", write(CFG, "{hidden_size: 64}"), [CFG, "not valid JSON", "byte offset 1"]),
    ("config_truncated", cfg_text(lambda t: t[:len(t) // 2]), [CFG, "not valid JSON"]),
    ("config_array", write(CFG, "[]"), [CFG, "object"]),
    ("config_invalid_utf8", on_file(CFG, lambda b: b.replace(b"silu", b"s\xffl\xfe")),
     [CFG, "not valid JSON", "byte offset"]),
    ("config_nan", cfg_text(lambda t: t.replace('"rms_norm_eps": 1e-05', '"rms_norm_eps": NaN')),
     [CFG, "not valid JSON"]),
    # nlohmann's parser stops at a NUL byte: "{...}\0garbage" used to load as "{...}"
    ("config_nul_then_garbage", on_file(CFG, lambda b: b + b"\0{{{"), [CFG, "NUL byte"]),
    ("config_is_directory", replace_by(CFG, "dir"), [CFG, NOT_REG]),
    ("config_is_fifo", replace_by(CFG, "fifo"), [CFG, NOT_REG]),
] + [(f"config_missing_{f}", cfg_del(f), [CFG, f, "missing"])
     for f in ("vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers",
               "num_attention_heads", "num_local_experts")] + [
    ("config_null_hidden_size", cfg(hidden_size=None), [CFG, "hidden_size", "missing"]),
    ("config_negative_hidden", cfg(hidden_size=-64), [CFG, "hidden_size", "-64"]),
    ("config_zero_layers", cfg(num_hidden_layers=0, layer_types=[]), [CFG, "num_hidden_layers"]),
    ("config_negative_vocab", cfg(vocab_size=-1), [CFG, "vocab_size", "-1"]),
    ("config_huge_vocab", cfg(vocab_size=2**40), [CFG, "vocab_size", "out of range"]),
    ("config_vocab_2_63", cfg(vocab_size=2**63), [CFG, "vocab_size", "too large"]),
    ("config_string_size", cfg(hidden_size="64"), [CFG, "hidden_size", "string"]),
    ("config_fractional_size", cfg(hidden_size=64.5), [CFG, "hidden_size", "64.5"]),
    ("config_bool_size", cfg(num_local_experts=True), [CFG, "num_local_experts", "boolean"]),
    ("config_topk_gt_experts", cfg(num_experts_per_tok=5, experts_per_token=5),
     [CFG, "experts_per_token", "= 5", "[1, 4]"]),
    ("config_topk_zero", cfg(num_experts_per_tok=0, experts_per_token=0),
     [CFG, "experts_per_token"]),
    ("config_topk_disagree", cfg(num_experts_per_tok=1),
     [CFG, "experts_per_token", "num_experts_per_tok"]),
    ("config_hidden_not_mult32_mxfp4", cfg(hidden_size=48), [CFG, "hidden_size", "32", "MXFP4"]),
    ("config_intermediate_not_mult32_mxfp4", cfg(intermediate_size=40),
     [CFG, "intermediate_size", "32"]),
    ("config_heads_not_multiple_of_kv", cfg(num_key_value_heads=3), [CFG, "num_key_value_heads"]),
    ("config_kv_gt_heads", cfg(num_key_value_heads=8), [CFG, "num_key_value_heads"]),
    ("config_head_dim_odd", cfg(head_dim=15), [CFG, "head_dim", "even"]),
    ("config_layer_types_short", cfg(layer_types=["full_attention"]), [CFG, "layer_types"]),
    ("config_layer_types_unknown", cfg(layer_types=["full_attention", "global"]),
     [CFG, "layer_types[1]", "global"]),
    ("config_sliding_window_zero", cfg(sliding_window=0), [CFG, "sliding_window"]),
    ("config_sliding_window_negative", cfg(sliding_window=-1), [CFG, "sliding_window"]),
    ("config_rms_eps_negative", cfg(rms_norm_eps=-1e-5), [CFG, "rms_norm_eps"]),
    ("config_rope_theta_zero", cfg(rope_theta=0), [CFG, "rope_theta", "> 1"]),
    ("config_rope_theta_below_one", cfg(rope_theta=0.5), [CFG, "rope_theta", "> 1"]),
    ("config_rope_factor_negative", J(CFG, lambda c: c["rope_scaling"].update(factor=-2.0)),
     [CFG, "factor"]),
    ("config_rope_type_unknown", J(CFG, lambda c: c["rope_scaling"].update(rope_type="longrope")),
     [CFG, "rope_type", "longrope"]),
    ("config_rope_scaling_string", cfg(rope_scaling="yarn"), [CFG, "rope_scaling"]),
    ("config_unknown_quant", J(CFG, lambda c: c["quantization_config"].update(quant_method="gptq")),
     [CFG, "quant_method", "gptq"]),
    ("config_eos_out_of_range", cfg(eos_token_id=512), [CFG, "eos_token_id", "512"]),
    ("config_pad_negative", cfg(pad_token_id=-5), [CFG, "pad_token_id"]),
    ("config_tie_string", cfg(tie_word_embeddings="yes"), [CFG, "tie_word_embeddings"]),
    # config and weights disagree
    ("config_hidden_mismatch", cfg(hidden_size=128), [EMBED, "[512, 128]", "[512, 64]"]),
    ("config_vocab_mismatch", cfg(vocab_size=1024), [EMBED, "[1024, 64]", "[512, 64]"]),
    ("config_fewer_layers", cfg(num_hidden_layers=1, layer_types=["full_attention"]),
     ["model.layers.1.", "num_hidden_layers = 1"]),
    ("config_more_layers", cfg(num_hidden_layers=3, layer_types=["full_attention"] * 3),
     ["model.layers.2.", "not found"]),
    ("config_more_experts", cfg(num_local_experts=8), ["[8, 64]", "[4, 64]"]),
    ("config_tied_vocab_wrong", cfg(tie_word_embeddings=True, vocab_size=256),
     [EMBED, "[256, 64]"]),
    # sharded checkpoints
    ("index_missing_shard", lambda d: (d / SH2).unlink(), [INDEX, SH2, "does not exist"], S),
    ("index_nul_then_garbage", on_file(INDEX, lambda b: b + b"\0xx"), [INDEX, "NUL byte"], S),
    ("index_wrong_shard", wmap(lambda m: m.update({SINKS1: SH2 if m[SINKS1] != SH2 else SH3})),
     [INDEX, SINKS1, "does not contain"], S),
    ("index_unknown_tensor", wmap(lambda m: m.update({"model.ghost": SH2})),
     [INDEX, "model.ghost", "does not contain"], S),
    ("index_dot_dot_shard", wmap(lambda m: m.update({SINKS1: "../x.safetensors"})),
     [INDEX, "../x.safetensors", "plain file name"], S),
    ("index_absolute_shard", wmap(lambda m: m.update({SINKS1: "/etc/passwd"})),
     [INDEX, "plain file name"], S),
    ("index_shard_is_index", wmap(lambda m: m.update({SINKS1: INDEX})), [INDEX, "header length"], S),
    ("index_value_not_string", wmap(lambda m: m.update({SINKS1: 3})),
     [INDEX, SINKS1, "not a string"], S),
    ("index_no_weight_map", J(INDEX, lambda o: o.pop("weight_map")), [INDEX, "weight_map"], S),
    ("index_empty_weight_map", J(INDEX, lambda o: o.update(weight_map={})),
     [INDEX, "'weight_map' is empty"], S),
    ("index_empty_file", write(INDEX, ""), [INDEX, "not valid JSON"], S),
    ("index_not_json", write(INDEX, "{weight_map"), [INDEX, "not valid JSON"], S),
    ("index_array", write(INDEX, "[]"), [INDEX, "not a JSON object"], S),
    ("index_invalid_utf8", on_file(INDEX, lambda b: b.replace(b"model.norm", b"model\xff.norm")),
     [INDEX, "not valid JSON"], S),
    ("index_is_fifo", replace_by(INDEX, "fifo"), [INDEX, NOT_REG], S),
    ("index_is_directory", replace_by(INDEX, "dir"), [INDEX, NOT_REG], S),
    ("shard_truncated", on_file(SH3, lambda b: b[:len(b) - 100]), [SH3, "past the end"], S),
    ("shard_is_fifo", replace_by(SH3, "fifo"), [SH3, NOT_REG], S),
    ("duplicate_across_shards", duplicate_across_shards,
     ["appears in both", "model-00001-of-00004.safetensors", SH2], S),
    ("duplicate_across_files_no_index", split_no_index,
     ["appears in both", "a.safetensors", "b.safetensors"]),
    # tokenizer.json (read by `run`, always with --prompt, and from the model dir if present)
    ("tokenizer_missing", lambda d: None, ["needs a tokenizer"], {"which": ("prompt",)}),
    ("tokenizer_empty", write(TOK, ""), [TOK], TOKCMDS),
    ("tokenizer_not_json", write(TOK, "{model"), [TOK], TOKCMDS),
    ("tokenizer_array", write(TOK, "[]"), [TOK], TOKCMDS),
    ("tokenizer_no_model", write(TOK, '{"added_tokens": []}'), [TOK], TOKCMDS),
    ("tokenizer_invalid_utf8", write(TOK, b'{"version": "1\xff"}'), [TOK], TOKCMDS),
    ("tokenizer_deeply_nested", write(TOK, '{"model": ' + deep() + "}"), [TOK], TOKCMDS),
    ("tokenizer_truncated", truncated_tokenizer, [TOK], TOKCMDS),
    ("tokenizer_is_directory", replace_by(TOK, "dir"), [TOK], TOKCMDS),
    ("tokenizer_is_fifo", replace_by(TOK, "fifo"), [TOK, NOT_REG], dict(TOKCMDS, timeout=10)),
    # the directory itself
    ("dir_empty", empty_dir, [CFG], {"which": ("run",)}),
    ("dir_empty_inspect", empty_dir, ["no *.safetensors"], {"which": ("inspect",)}),
    ("dir_only_config", lambda d: (d / ST).unlink(), ["no *.safetensors"]),
    ("dir_unrelated_files", unrelated_dir, [CFG], {"which": ("run",)}),
    ("model_is_directory", replace_by(ST, "dir"), [ST, NOT_REG]),
    ("model_is_fifo", replace_by(ST, "fifo"), [ST, NOT_REG]),
    ("stray_fifo_safetensors", seq(empty_dir, replace_by("x.safetensors", "fifo")),
     ["x.safetensors", NOT_REG], {"which": ("inspect",)}),
]


def _param(case):
    name, mutate, must, opts = (*case, {})[:4]
    marks = [pytest.mark.xfail(reason=opts["xfail"], strict=True)] if "xfail" in opts else []
    return pytest.param(mutate, must, opts, id=name, marks=marks)


@pytest.mark.parametrize("mutate,must,opts", [_param(c) for c in CASES])
def test_corrupt_checkpoint_fails_cleanly(mutate, must, opts, bases, tmp_path):
    d = copy_base(bases, tmp_path / "m", opts.get("base", "mx"))
    mutate(d)
    problems = check_load(d, opts.get("which", ("inspect", "run")), True, all_of=must,
                          timeout=opts.get("timeout", TIMEOUT_S))
    assert not problems, "\n".join(problems)
