"""OpenAI's own checkpoint layout (the `original/` directory of a gpt-oss snapshot, read by
openai/gpt-oss torch/model.py): a synthetic Hugging Face checkpoint is rewritten into it here,
from the mapping of the reference's names (independent of the loader's code), and both must
give bit-identical logits: the bytes are the same, only names, the fused QKV tensor and the
config fields differ."""
import json
import pathlib
import random
import shutil

import numpy as np
import pytest
import torch
from safetensors.torch import load_file, save_file

from conftest import fresh_seed

LAYER_MAP = {  # Hugging Face name under model.layers.N. -> original name under block.N.
    "input_layernorm.weight": "attn.norm.scale",
    "self_attn.o_proj.weight": "attn.out.weight",
    "self_attn.o_proj.bias": "attn.out.bias",
    "self_attn.sinks": "attn.sinks",
    "post_attention_layernorm.weight": "mlp.norm.scale",
    "mlp.router.weight": "mlp.gate.weight",
    "mlp.router.bias": "mlp.gate.bias",
    "mlp.experts.gate_up_proj_blocks": "mlp.mlp1_weight.blocks",
    "mlp.experts.gate_up_proj_scales": "mlp.mlp1_weight.scales",
    "mlp.experts.gate_up_proj_bias": "mlp.mlp1_bias",
    "mlp.experts.down_proj_blocks": "mlp.mlp2_weight.blocks",
    "mlp.experts.down_proj_scales": "mlp.mlp2_weight.scales",
    "mlp.experts.down_proj_bias": "mlp.mlp2_bias",
}


def to_original(hf: pathlib.Path, out: pathlib.Path):
    """Writes out/config.json and out/model.safetensors in the reference's layout."""
    cfg = json.loads((hf / "config.json").read_text())
    rs = cfg["rope_scaling"]
    assert rs["rope_type"] == "yarn" and not rs.get("truncate", True)
    assert cfg["layer_types"] == [("sliding_attention", "full_attention")[i % 2]
                                  for i in range(cfg["num_hidden_layers"])]
    orig = {k: cfg[k] for k in ("num_hidden_layers", "vocab_size", "hidden_size",
                                "intermediate_size", "swiglu_limit", "head_dim",
                                "num_attention_heads", "num_key_value_heads", "sliding_window",
                                "rope_theta")}
    orig.update(num_experts=cfg["num_local_experts"], experts_per_token=cfg["num_experts_per_tok"],
                initial_context_length=rs["original_max_position_embeddings"],
                rope_scaling_factor=rs["factor"], rope_ntk_alpha=rs["beta_slow"],
                rope_ntk_beta=rs["beta_fast"])
    t = {}
    for f in sorted(hf.glob("*.safetensors")):
        t.update(load_file(f))
    o = {"embedding.weight": t.pop("model.embed_tokens.weight"),
         "norm.scale": t.pop("model.norm.weight"),
         "unembedding.weight": t.pop("lm_head.weight")}
    for n in range(cfg["num_hidden_layers"]):
        p, q = f"model.layers.{n}.", f"block.{n}."
        for kind in ("weight", "bias"):
            o[q + "attn.qkv." + kind] = torch.cat(
                [t.pop(p + f"self_attn.{x}_proj.{kind}") for x in "qkv"], dim=0).contiguous()
        for src, dst in LAYER_MAP.items():
            o[q + dst] = t.pop(p + src)
    assert not t, f"tensors left unmapped: {sorted(t)[:5]}"
    out.mkdir(parents=True)
    (out / "config.json").write_text(json.dumps(orig, indent=2))
    save_file(o, out / "model.safetensors")


def logits(gossamer, path, tokens, out):
    gossamer("logits", "--model", path, "--tokens", ",".join(map(str, tokens)), "--out", out)
    return np.load(out)


@pytest.mark.parametrize("extra", [[], ["--heads", "8", "--kv-heads", "2", "--layers", "3",
                                        "--experts", "8", "--experts-per-token", "3"]])
def test_original_layout_gives_the_same_logits(gossamer, tokenizer_json, tmp_path, extra):
    rng = random.Random(fresh_seed("original layout"))
    snap = tmp_path / "snapshot"
    gossamer("synth", "--preset", "tiny", "--out", snap, "--tokenizer", tokenizer_json,
             "--seed", rng.randrange(2**31), "--quiet", *extra)
    to_original(snap, snap / "original")
    tokens = [rng.randrange(201088) for _ in range(rng.randint(3, 20))]
    hf = logits(gossamer, snap, tokens, tmp_path / "hf.npy")
    orig = logits(gossamer, snap / "original", tokens, tmp_path / "orig.npy")
    assert hf.shape == orig.shape == (len(tokens), 201088)
    assert np.array_equal(hf, orig), float(np.abs(hf - orig).max())
    # The original directory carries no tokenizer.json: the snapshot's is used (greedy text).
    run = ("--prompt", "Hello", "-n", "4", "--temperature", "0", "--ignore-eos")
    a = gossamer("run", "--model", snap, *run).stdout
    b = gossamer("run", "--model", snap / "original", *run).stdout
    assert a == b and a
    info = json.loads(gossamer("inspect", "--model", snap / "original").stdout)
    assert info["model"]["layout"] == "openai-original" and not info["model"]["unused_tensors"]
    assert json.loads(gossamer("inspect", "--model", snap).stdout)["model"]["layout"] == \
        "huggingface"


def test_original_layout_errors_name_the_tensor(gossamer, tokenizer_json, tmp_path):
    snap = tmp_path / "snapshot"
    gossamer("synth", "--preset", "tiny", "--out", snap, "--tokenizer", tokenizer_json, "--quiet")
    to_original(snap, snap / "original")
    t = load_file(snap / "original" / "model.safetensors")
    qkv = t.pop("block.1.attn.qkv.weight")
    bad = dict(t, **{"block.1.attn.qkv.weight": qkv[:-1].contiguous()})
    save_file(bad, snap / "original" / "model.safetensors")
    p = gossamer("inspect", "--model", snap / "original", check=False)
    err = p.stderr.decode()
    assert p.returncode != 0 and "block.1.attn.qkv.weight" in err and "[128, 64]" in err and "[127, 64]" in err, err
    save_file(t, snap / "original" / "model.safetensors")  # the tensor missing
    p = gossamer("inspect", "--model", snap / "original", check=False)
    err = p.stderr.decode()
    assert p.returncode != 0 and "'block.1.attn.qkv.weight'" in err and "not found" in err, err
    cfg = json.loads((snap / "original" / "config.json").read_text())
    cfg["num_experts"] = "four"
    (snap / "original" / "config.json").write_text(json.dumps(cfg))
    p = gossamer("inspect", "--model", snap / "original", check=False)
    err = p.stderr.decode()
    assert p.returncode != 0 and "num_experts" in err and "config.json" in err, err
