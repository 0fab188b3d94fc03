"""Checkpoint-loading robustness: a black-box sweep of corrupt and unusual model directories.

`gossamer synth` makes two small valid checkpoints (single-file MXFP4; bf16 experts in 4 shards
with model.safetensors.index.json). Every case copies one and breaks one thing: the safetensors
framing (truncations, header length, JSON, UTF-8, NUL bytes), header entries (dtype, shape,
data_offsets), the tensors the config implies (missing, wrong shape/dtype, MXFP4 scales, extra
layers, alignment), the shard index, config.json, tokenizer.json, and the directory itself (empty,
FIFOs, directories where files belong, not a checkpoint).

The loading commands (`gossamer inspect DIR`: the full load_model; `gossamer run --model DIR`:
load and run the CPU engine) must exit with status 1 within a timeout, never by a signal, printing
an error that names the problem: file, tensor or field, byte offset where the framing is at fault.
Valid-but-unusual checkpoints (reordered, re-sharded, symlinked, extra metadata, F32 tensors,
unknown extra tensors, holes) must load and give bit-identical logits. Randomised truncations,
byte flips and field mutations use a fresh seed (printed; GOSSAMER_TEST_SEED=N replays it).
"""
import json
import os
import random
import shutil
import struct
import subprocess

import numpy as np
import pytest

from conftest import SHARED, gossamer_bin

TIMEOUT_S = 30
ST = "model.safetensors"
INDEX = "model.safetensors.index.json"
CFG = "config.json"
TOK = "tokenizer.json"
SH2, SH3 = "model-00002-of-00004.safetensors", "model-00003-of-00004.safetensors"
SINKS0, SINKS1 = "model.layers.0.self_attn.sinks", "model.layers.1.self_attn.sinks"
ROUTER0 = "model.layers.0.mlp.router.weight"
SCALES0 = "model.layers.0.mlp.experts.gate_up_proj_scales"
BLOCKS1 = "model.layers.1.mlp.experts.down_proj_blocks"
QBIAS0 = "model.layers.0.self_attn.q_proj.bias"
EMBED = "model.embed_tokens.weight"
COMMANDS = {
    "inspect": lambda d: ("inspect", d),
    "run": lambda d: ("run", "--model", d, "--tokens", "1,2,3", "-n", "2", "--ids", "--threads",
                      "1", "--temperature", "0"),
    "prompt": lambda d: ("run", "--model", d, "--prompt", "Hello", "-n", "1", "--threads", "1"),
}


SANITIZER_REPORTS = ("AddressSanitizer", "LeakSanitizer", "runtime error:")


def gossamer_cmd(*args, timeout=TIMEOUT_S):
    """-> (returncode, stdout, stderr); raises subprocess.TimeoutExpired on a hang."""
    p = subprocess.run([gossamer_bin(), *map(str, args)], capture_output=True, timeout=timeout)
    return p.returncode, p.stdout.decode(errors="replace"), p.stderr.decode(errors="replace")


def check_load(d, which, must_fail, any_of=(), all_of=(), timeout=TIMEOUT_S):
    """Runs the commands `which` on checkpoint `d`. Each must exit 1 (or 0 if not `must_fail`),
    never by a signal or a hang; an error must name everything in `all_of` and something of
    `any_of`; and `run` must accept whatever `inspect` accepts (inspect validates the whole
    checkpoint: the engine must not find a problem it missed). Returns the problems found."""
    problems, rcs = [], {}
    for name in which:
        try:
            rc, _, err = gossamer_cmd(*COMMANDS[name](d), timeout=timeout)
        except subprocess.TimeoutExpired:
            problems.append(f"{name}: no exit within {timeout} s (hang)")
            continue
        rcs[name] = rc
        if any(s in err for s in SANITIZER_REPORTS):  # sanitizers exit with 1 by default
            problems.append(f"{name}: sanitizer report\n{err[-4000:]}")
            continue
        err = err[-2000:]
        if rc < 0 or rc not in ((1,) if must_fail else (0, 1)):
            problems.append(f"{name}: exit {rc}\n{err}")
        elif rc == 1 and [m for m in all_of if m not in err]:
            problems.append(f"{name}: error does not name {[m for m in all_of if m not in err]}:"
                            f"\n{err}")
        elif rc == 1 and any_of and not any(m in err for m in any_of):
            problems.append(f"{name}: error names none of {list(any_of)}:\n{err}")
    if rcs.get("inspect") == 0 and rcs.get("run", 0) != 0:
        problems.append("inspect accepts the checkpoint but run fails")
    return problems


# ---- safetensors bytes, written here (independent of gossamer's reader and writer) ----------

def split_st(b):
    n = struct.unpack("<Q", b[:8])[0]
    return json.loads(b[8:8 + n]), b[8 + n:]


def raw_st(header_bytes, data=b""):
    return struct.pack("<Q", len(header_bytes)) + header_bytes + data


def st_bytes(header, data, pad_to=8):
    text = json.dumps(header, separators=(",", ":")).encode()
    return raw_st(text + b" " * ((-(8 + len(text))) % pad_to), data)


def pack_tensors(tensors, metadata=None, align=8):
    """tensors: [(name, dtype, shape, bytes)], laid out in this order, each start aligned."""
    header, data = ({} if metadata is None else {"__metadata__": metadata}), b""
    for name, dtype, shape, raw in tensors:
        data += b"\0" * ((-len(data)) % align)
        header[name] = {"dtype": dtype, "shape": list(shape),
                        "data_offsets": [len(data), len(data) + len(raw)]}
        data += raw
    return st_bytes(header, data)


def tensors_of(path):
    """-> [(name, dtype, shape, bytes)] in header order."""
    header, data = split_st(path.read_bytes())
    return [(k, v["dtype"], v["shape"], data[v["data_offsets"][0]:v["data_offsets"][1]])
            for k, v in header.items() if k != "__metadata__"]


def header_len(b):
    return struct.unpack("<Q", b[:8])[0]


# ---- fixtures --------------------------------------------------------------------------------

@pytest.fixture(scope="session")
def bases(tmp_path_factory):
    root = tmp_path_factory.mktemp("bases")
    synth = ["synth", "--preset", "tiny", "--vocab", "512", "--quiet", "--threads", "1"]
    for name, extra in (("mx", []), ("sharded", ["--expert-format", "bf16", "--shard-size",
                                                   "100K"])):
        rc, _, err = gossamer_cmd(*synth, *extra, "--out", root / name)
        assert rc == 0, err
    assert (root / "sharded" / INDEX).exists() and (root / "sharded" / SH3).exists()
    return root


def copy_base(bases, dst, which="mx"):
    shutil.copytree(bases / which, dst)
    return dst


def logits(d, out):
    rc, _, err = gossamer_cmd("logits", "--model", d, "--tokens", "1,2,3,4", "--out", out,
                              "--threads", "1")
    assert rc == 0, f"{d}: logits failed:\n{err}"
    return np.load(out)


@pytest.fixture(scope="session")
def base_logits(bases, tmp_path_factory):
    t = tmp_path_factory.mktemp("base_logits")
    return {w: logits(bases / w, t / f"{w}.npy") for w in ("mx", "sharded")}


@pytest.fixture
def seed():
    s = int(os.environ.get("GOSSAMER_TEST_SEED", int.from_bytes(os.urandom(4), "little")))
    print(f"GOSSAMER_TEST_SEED={s}")
    return s


# ---- mutations: each returns a function of the checkpoint directory -------------------------

def on_file(name, fn):
    """fn(bytes) -> bytes applied to DIR/name."""
    def op(d):
        b = (d / name).read_bytes()
        (d / name).write_bytes(fn(b))
    return op


def R(fn):  # noqa: N802 - raw bytes of model.safetensors
    return on_file(ST, fn)


def H(fn, name=ST):  # noqa: N802 - the header of a safetensors file as a dict
    def op(b):
        header, data = split_st(b)
        fn(header)
        return st_bytes(header, data)
    return on_file(name, op)


def J(name, fn):  # noqa: N802 - a JSON file as an object
    return on_file(name, lambda b: (lambda o: (fn(o), json.dumps(o, indent=1).encode())[1])(
        json.loads(b)))


def set_(entry, key, value):
    return H(lambda h: h[entry].__setitem__(key, value))


def pop(entry, key=None):
    return H(lambda h: h.pop(entry) if key is None else h[entry].pop(key))


def reshape(entry, shape, dtype=None):
    """A consistent header entry of the same byte size with another shape (and dtype)."""
    return H(lambda h: h[entry].update(shape=shape, **({"dtype": dtype} if dtype else {})))


def cfg(**kv):
    return J(CFG, lambda c: c.update(kv))


def cfg_del(*keys):
    return J(CFG, lambda c: [c.pop(k, None) for k in keys])


def cfg_text(fn):
    return on_file(CFG, lambda b: fn(b.decode()).encode())


def wmap(fn):
    return J(INDEX, lambda o: fn(o["weight_map"]))


def write(name, content):
    return lambda d: (d / name).write_bytes(content if isinstance(content, bytes)
                                            else content.encode())


def replace_by(name, kind):
    """DIR/name replaced by a FIFO or a directory."""
    def op(d):
        if (d / name).exists():
            (d / name).unlink()
        os.mkfifo(d / name) if kind == "fifo" else (d / name).mkdir()
    return op


def deep(n=100000):
    return "[" * n + "]" * n


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


def rewrite(fn, **kw):
    """model.safetensors rebuilt from fn(tensors) by pack_tensors(**kw)."""
    return lambda d: (d / ST).write_bytes(pack_tensors(fn(tensors_of(d / ST)), **kw))


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


def seq(*ops):
    return lambda d: [op(d) for op in ops]


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
    ("original_openai_layout", H(lambda h: h.update({"embedding.weight": h.pop(EMBED)})),
     ["original", "embedding.weight"]),
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


# ---- valid but unusual checkpoints: must load and compute exactly what the base computes -----

def bf16_to_f32(raw):
    return (np.frombuffer(raw, np.uint16).astype(np.uint32) << 16).view(np.float32).tobytes()


def reshard(d, index=True):
    """model.safetensors split into 3 files with other names, tensors shuffled between them."""
    ts = tensors_of(d / ST)
    (d / ST).unlink()
    random.Random(2).shuffle(ts)
    names, wm = ("w-a.safetensors", "w-b.safetensors", "w-c.safetensors"), {}
    for i, name in enumerate(names):
        (d / name).write_bytes(pack_tensors(ts[i::3], {"shard": str(i)} if i else None))
        wm.update({t[0]: name for t in ts[i::3]})
    if index:
        (d / INDEX).write_text(json.dumps({"metadata": {"total_size": 1, "x": [1]},
                                           "weight_map": wm}))


def unshard(d):
    ts = []
    for p in sorted(d.glob("*.safetensors")):
        ts += tensors_of(p)
        p.unlink()
    (d / INDEX).unlink()
    (d / ST).write_bytes(pack_tensors(ts))


def upcast(pred):
    """BF16 tensors whose name satisfies `pred` as exact F32 copies."""
    return rewrite(lambda ts: [(n, "F32", s, bf16_to_f32(b)) if dt == "BF16" and pred(n)
                               else (n, dt, s, b) for n, dt, s, b in ts])


EXTRA_TENSORS = [("model.rotary_emb.inv_freq", "F32", [8], bytes(32)),
                 ("model.layers.0.mlp.experts.unknown", "I64", [2], b"\1" * 16),
                 ("model.layers.x.foo", "BF16", [1], bytes(2)),
                 ("lm_head.weight_g", "F64", [], bytes(8)), ("empty", "BF16", [0, 64], b"")]


def holes_and_padding(b):
    """24-byte holes before every tensor, 100 trailing bytes, header padded to 4096."""
    header, data = split_st(b)
    new, out = {"__metadata__": {"k": "v" * 1000}}, b""
    for k, v in header.items():
        if k != "__metadata__":
            out += b"\xab" * 24
            new[k] = dict(v, data_offsets=[len(out), len(out) + v["data_offsets"][1]
                                           - v["data_offsets"][0]])
            out += data[v["data_offsets"][0]:v["data_offsets"][1]]
    return st_bytes(new, out + b"\xcd" * 100, pad_to=4096)


def symlinked(d):
    """The Hugging Face cache layout: snapshot files are symlinks into blobs/."""
    blobs = d.parent / "blobs"
    blobs.mkdir()
    for p in list(d.iterdir()):
        shutil.move(p, blobs / p.name)
        p.symlink_to(os.path.relpath(blobs / p.name, d))


VALID_EXTRA = rewrite(lambda ts: ts + EXTRA_TENSORS)
VALID = [
    ("reordered", "mx", rewrite(lambda ts: random.Random(1).sample(ts, len(ts)),
                                metadata={"format": "pt", "note": "reordered"})),
    ("resharded_with_index", "mx", reshard),
    ("file_set_without_index", "mx", lambda d: reshard(d, index=False)),
    ("sharded_merged", "sharded", unshard),
    ("f32_biases_norms_sinks", "mx", upcast(lambda n: "bias" in n or "norm" in n or "sinks" in n)),
    ("f32_everything", "mx", upcast(lambda n: True)),
    ("extra_unknown_tensors", "mx", VALID_EXTRA),
    ("holes_trailing_bytes_big_padding", "mx", R(holes_and_padding)),
    ("no_metadata", "mx", pop("__metadata__")),
    ("symlinked_hf_cache_layout", "sharded", symlinked),
    ("config_without_quantization_config", "mx", cfg_del("quantization_config")),
    ("config_only_num_experts_per_tok", "mx", cfg_del("experts_per_token")),
    ("config_integral_floats", "mx", cfg(hidden_size=64.0, num_hidden_layers=2.0)),
    ("config_unknown_keys", "mx", cfg(foo={"bar": [1, 2]}, torch_dtype="bfloat16")),
    ("config_deep_unknown_in_rope_dict", "mx",
     cfg_text(lambda t: t.replace('"rope_scaling": {', '"rope_scaling": {"x": ' + deep() + ",",
                                  1))),
    ("config_deep_unknown_key", "mx", cfg_text(lambda t: '{"zzz": ' + deep() + "," + t[1:])),
    ("index_lists_fewer_tensors", "sharded", wmap(lambda m: m.pop(SINKS1))),
    ("unreferenced_file_ignored", "sharded", write("zzz-stray.safetensors", b"not safetensors")),
]


@pytest.mark.parametrize("base,mutate", [pytest.param(b, m, id=n) for n, b, m in VALID])
def test_valid_unusual_checkpoint_loads_identically(base, mutate, bases, base_logits, tmp_path):
    d = copy_base(bases, tmp_path / "m", base)
    mutate(d)
    rc, out, err = gossamer_cmd("inspect", d)
    assert rc == 0, err
    model = json.loads(out)["model"]
    assert model["num_hidden_layers"] == 2
    # Tensors the model does not use are listed (transformers' load report: UNEXPECTED).
    want = sorted(t[0] for t in EXTRA_TENSORS) if mutate is VALID_EXTRA else []
    assert model["unused_tensors"] == want
    np.testing.assert_array_equal(logits(d, tmp_path / "l.npy"), base_logits[base])


def test_attention_bias_false_ignores_present_biases(bases, tmp_path):
    """As transformers (projections built without bias, the tensors reported UNEXPECTED): with
    attention_bias false, bias tensors in the checkpoint take no part; the logits equal those of
    the same checkpoint with zero attention biases."""
    zeroed = copy_base(bases, tmp_path / "zeroed")
    rewrite(lambda ts: [(n, dt, s, bytes(len(b)) if "self_attn" in n and n.endswith("_proj.bias")
                         else b) for n, dt, s, b in ts])(zeroed)
    d = copy_base(bases, tmp_path / "m")
    cfg(attention_bias=False)(d)
    rc, out, err = gossamer_cmd("inspect", d)
    assert rc == 0, err
    assert json.loads(out)["model"]["unused_tensors"] == sorted(
        f"model.layers.{i}.self_attn.{p}_proj.bias" for i in (0, 1) for p in "koqv")
    np.testing.assert_array_equal(logits(d, tmp_path / "a.npy"), logits(zeroed, tmp_path / "b.npy"))


def test_tied_embeddings_without_lm_head_loads(bases, tmp_path):
    d = copy_base(bases, tmp_path / "m")
    seq(pop("lm_head.weight"), cfg(tie_word_embeddings=True))(d)
    rc, out, err = gossamer_cmd("inspect", "--model", d)  # --model as in the other subcommands
    assert rc == 0, err
    assert json.loads(out)["model"]["tie_word_embeddings"] is True
    assert np.isfinite(logits(d, tmp_path / "l.npy")).all()


# ---- randomised sweep ----------------------------------------------------------------------

CONFIG_KEYS = ["vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers",
               "num_attention_heads", "num_key_value_heads", "num_local_experts",
               "experts_per_token", "num_experts_per_tok", "head_dim", "sliding_window",
               "rms_norm_eps", "rope_theta", "rope_scaling", "layer_types", "swiglu_limit",
               "eos_token_id", "pad_token_id", "tie_word_embeddings", "attention_bias",
               "quantization_config", "max_position_embeddings", "initial_context_length"]
VALUES = [None, True, False, 0, 1, -1, 2, 3, 16, 31, 33, 63, 64, 65, 128, 2**31, 2**62, 2**64,
          -2**63, 0.5, 64.0, -0.0, 1e308, 1e-308, "", "64", "yarn", [], [1], [0, 1],
          ["full_attention"], {}, {"rope_type": "yarn"}, {"rope_type": "yarn", "factor": 0.5},
          {"quant_method": "mxfp4"}, {"factor": 0}, [[[[]]]]]
ENTRY_VALUES = VALUES + ["F16", "F32", "U8", "I32", "F64", "F4", [4], [64], [4, 64], [0, 8],
                         [8, 0], [0, 2**63]]


def random_case(rng, kind, d):
    """Applies one random corruption of `kind` to `d`; -> (description, must_fail, names the
    error must contain one of)."""
    b = (d / ST).read_bytes()
    n = header_len(b)
    header, _ = split_st(b)
    if kind == "truncate_header":  # anywhere before the data region
        at = rng.randrange(0, 8 + n)
        return R(lambda b: b[:at])(d) or (f"truncate {ST} at {at}", True, [ST])
    if kind == "truncate_data":  # anywhere before the last tensor's end
        end = 8 + n + max(v["data_offsets"][1] for k, v in header.items() if k != "__metadata__")
        at = rng.randrange(8 + n, end)
        return R(lambda b: b[:at])(d) or (f"truncate {ST} at {at}", True, [ST])
    if kind == "flip_length":
        i, bit = rng.randrange(0, 8), rng.randrange(0, 8)
        R(lambda b: b[:i] + bytes([b[i] ^ (1 << bit)]) + b[i + 1:])(d)
        return f"flip bit {bit} of length byte {i}", True, [ST]
    if kind == "flip_header":
        i, v = rng.randrange(8, 8 + n), rng.randrange(0, 256)
        R(lambda b: b[:i] + bytes([v]) + b[i + 1:])(d)
        return f"header byte {i} := {v}", False, [ST]
    if kind == "entry_field":
        name = rng.choice([k for k in header if k != "__metadata__"])
        key, val = rng.choice(["dtype", "shape", "data_offsets"]), rng.choice(ENTRY_VALUES)
        set_(name, key, val)(d)
        return f"{name}.{key} := {val!r}", False, [name, ST]
    if kind == "config":
        key, val = rng.choice(CONFIG_KEYS), rng.choice(VALUES)
        cfg(**{key: val})(d)
        return f"config {key} := {val!r}", False, [CFG, ".safetensors"]
    if kind == "config_drop":
        key = rng.choice(CONFIG_KEYS)
        cfg_del(key)(d)
        return f"config drop {key}", False, [CFG, ".safetensors"]
    if kind == "config_truncate":
        at = rng.randrange(0, (d / CFG).stat().st_size - 2)
        on_file(CFG, lambda b: b[:at])(d)
        return f"{CFG} truncated at {at}", True, [CFG]
    raise AssertionError(kind)


KINDS = [("truncate_header", 15), ("truncate_data", 15), ("flip_length", 10), ("flip_header", 40),
         ("entry_field", 40), ("config", 40), ("config_drop", 15), ("config_truncate", 10)]


def test_random_corruptions(bases, tmp_path, seed):
    rng, failures, i = random.Random(seed), [], 0
    for kind, count in KINDS:
        for _ in range(count):
            d = copy_base(bases, tmp_path / f"r{i}")
            i += 1
            what, must_fail, any_of = random_case(rng, kind, d)
            failures += [f"{what}: {p}" for p in check_load(d, ("inspect", "run"), must_fail,
                                                              any_of)]
            shutil.rmtree(d)
    assert not failures, f"GOSSAMER_TEST_SEED={seed}\n" + "\n".join(failures[:20])


def test_random_sharded_corruptions(bases, tmp_path, seed):
    """Truncations of a random shard and random weight_map edits of the sharded base."""
    rng, failures = random.Random(seed ^ 0x5eed), []
    for i in range(30):
        d = copy_base(bases, tmp_path / f"s{i}", "sharded")
        shards = sorted(p.name for p in d.glob("*.safetensors"))
        if i % 2 == 0:
            s = rng.choice(shards)
            at = rng.randrange(0, (d / s).stat().st_size - 8)
            on_file(s, lambda b: b[:at])(d)
            what, must_fail, any_of = f"truncate {s} at {at}", True, [s]
        else:
            wm = json.loads((d / INDEX).read_text())["weight_map"]
            name = rng.choice(sorted(wm))
            val = rng.choice(shards + ["", ".", "..", "nope.safetensors", "a/b", None, 1, []])
            wmap(lambda m: m.update({name: val}))(d)
            what, must_fail, any_of = f"weight_map[{name}] := {val!r}", val != wm[name], [INDEX]
        failures += [f"{what}: {p}" for p in check_load(d, ("inspect", "run"), must_fail, any_of)]
        shutil.rmtree(d)
    assert not failures, f"GOSSAMER_TEST_SEED={seed}\n" + "\n".join(failures[:20])
