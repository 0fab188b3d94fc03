"""Checkpoint loading: valid-but-unusual checkpoints must load and give bit-identical logits.

Reordered, re-sharded, symlinked (the Hugging Face cache layout), extra metadata, F32 tensors,
unknown extra tensors, holes and padding, unusual config.json: `inspect` must accept each, list
the tensors the model does not use, and `logits` must equal the unmodified base's.
"""
import json
import os
import random
import shutil

import numpy as np
import pytest

from ckpt_util import (INDEX, SINKS1, ST, R, cfg, cfg_del, cfg_text, copy_base, deep,
                       gossamer_cmd, pack_tensors, pop, rewrite, seq, split_st, st_bytes,
                       tensors_of, wmap, write)


def logits(d, out):
    rc, _, err = gossamer_cmd("logits", "--model", d, "--tokens", "1,2,3,4", "--out", out,
                              "--threads", "1")
    assert rc == 0, f"{d}: logits failed:\n{err}"
    return np.load(out)


@pytest.fixture(scope="session")
def base_logits(bases, tmp_path_factory):
    t = tmp_path_factory.mktemp("base_logits")
    return {w: logits(bases / w, t / f"{w}.npy") for w in ("mx", "sharded")}


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

