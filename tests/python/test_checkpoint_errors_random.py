"""Checkpoint loading: randomised truncations, byte flips and field mutations of the bases.

Each must fail cleanly (exit 1 naming the file or field, never a signal or a hang) or load, and
`run` must accept whatever `inspect` accepts. A fresh seed per run (printed;
GOSSAMER_TEST_SEED=N replays it).
"""
import json
import os
import random
import shutil

import pytest

from ckpt_util import (CFG, INDEX, ST, R, cfg, cfg_del, check_load, copy_base, header_len,
                       on_file, set_, split_st, wmap)


@pytest.fixture
def seed():
    s = int(os.environ.get("GOSSAMER_TEST_SEED", int.from_bytes(os.urandom(4), "little")))
    print(f"GOSSAMER_TEST_SEED={s}")
    return s


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
