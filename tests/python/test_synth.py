"""`gossamer synth` checked with independent readers: the `safetensors` package (file and index
validity), transformers (config parsing, weight layout, its own MXFP4 dequantisation, a forward
pass at the real 20b/120b layer shapes) and numpy (statistics)."""
import json
import os
import re
import subprocess
import sys

import numpy as np
import pytest
import torch
from safetensors import safe_open

from conftest import fresh_seed, gossamer_bin

SHARD_RE = re.compile(r"^model-(\d{5})-of-(\d{5})\.safetensors$")
E2M1 = np.array([0, .5, 1, 1.5, 2, 3, 4, 6, -0., -.5, -1, -1.5, -2, -3, -4, -6], np.float32)


@pytest.fixture(scope="module")
def seed():
    return fresh_seed("synth checkpoints")


@pytest.fixture(scope="module")
def tiny_mx(gossamer, tokenizer_json, tmp_path_factory, seed):
    out = tmp_path_factory.mktemp("synth") / "tiny_mx"
    gossamer("synth", "--preset", "tiny", "--out", out, "--seed", seed, "--shard-size", "8M",
             "--tokenizer", tokenizer_json, "--quiet")
    return out


@pytest.fixture(scope="module")
def tiny_bf(gossamer, tmp_path_factory, seed):
    out = tmp_path_factory.mktemp("synth") / "tiny_bf"
    gossamer("synth", "--preset", "tiny", "--out", out, "--seed", seed, "--expert-format", "bf16",
             "--quiet")
    return out


def load_all(path):
    """name -> torch tensor for every tensor of every safetensors file in `path`."""
    out = {}
    for f in sorted(os.listdir(path)):
        if f.endswith(".safetensors"):
            with safe_open(str(path / f), framework="pt") as st:
                for k in st.keys():
                    out[k] = st.get_tensor(k)
    return out


def dequant(blocks, scales):
    """MXFP4 [E, rows, cols/32, 16] u8 + [E, rows, cols/32] u8 -> f32 [E, rows, cols]."""
    b = blocks.numpy()
    codes = np.stack([b & 0xF, b >> 4], axis=-1).reshape(*b.shape[:-1], 32)  # low nibble first
    vals = E2M1[codes] * np.ldexp(1.0, scales.numpy().astype(np.int32) - 127)[..., None]
    return vals.reshape(b.shape[0], b.shape[1], -1)


def test_index_and_shards_valid(tiny_mx, tokenizer_json):
    files = sorted(os.listdir(tiny_mx))
    shards = [f for f in files if f.endswith(".safetensors")]
    assert len(shards) > 2 and all(SHARD_RE.match(f) for f in shards), shards
    n = len(shards)
    assert [int(SHARD_RE.match(f).group(1)) for f in shards] == list(range(1, n + 1))
    assert all(int(SHARD_RE.match(f).group(2)) == n for f in shards)
    index = json.loads((tiny_mx / "model.safetensors.index.json").read_text())
    weight_map = index["weight_map"]
    assert set(weight_map.values()) == set(shards)
    seen, total = {}, 0
    for f in shards:
        with safe_open(str(tiny_mx / f), framework="pt") as st:
            assert st.metadata() == {"format": "pt"}
            for k in st.keys():
                assert k not in seen, f"{k} in {f} and {seen[k]}"
                seen[k] = f
                t = st.get_tensor(k)
                total += t.numel() * t.element_size()
    assert seen == weight_map
    assert index["metadata"]["total_size"] == total
    assert (tiny_mx / "tokenizer.json").read_bytes() == tokenizer_json.read_bytes()
    cfg_src = tokenizer_json.parent / "tokenizer_config.json"
    assert (tiny_mx / "tokenizer_config.json").read_bytes() == cfg_src.read_bytes()
    gen = json.loads((tiny_mx / "generation_config.json").read_text())
    assert gen["eos_token_id"] == [200002, 199999, 200012]


def test_config_per_transformers(tiny_mx):
    from transformers import AutoConfig
    c = AutoConfig.from_pretrained(tiny_mx)
    assert c.model_type == "gpt_oss"
    assert (c.vocab_size, c.hidden_size, c.num_hidden_layers, c.num_local_experts) == \
        (201088, 64, 2, 4)
    assert c.num_experts_per_tok == 2 and c.layer_types == ["sliding_attention", "full_attention"]
    assert c.quantization_config["quant_method"] == "mxfp4"


def test_bf16_layout_equals_transformers_mxfp4_dequant(tiny_mx, tiny_bf):
    """transformers dequantises our MXFP4 checkpoint with its own code; the result must equal our
    bf16 checkpoint tensor for tensor (same seed), and load with no missing/unexpected keys."""
    from transformers import AutoModelForCausalLM, Mxfp4Config
    mb, info_b = AutoModelForCausalLM.from_pretrained(tiny_bf, dtype=torch.bfloat16,
                                                      output_loading_info=True)
    mm, info_m = AutoModelForCausalLM.from_pretrained(
        tiny_mx, dtype=torch.bfloat16, output_loading_info=True,
        quantization_config=Mxfp4Config(dequantize=True))
    for info in (info_b, info_m):
        assert not info["missing_keys"] and not info["unexpected_keys"], info
        assert not info["mismatched_keys"], info
    sb, sm = mb.state_dict(), mm.state_dict()
    assert sb.keys() == sm.keys()
    for k in sb:
        assert torch.equal(sb[k], sm[k]), k
    gu = sb["model.layers.1.mlp.experts.gate_up_proj"]
    assert gu.shape == (4, 64, 128) and (gu != 0).float().mean() > 0.8
    # Our own numpy dequantisation of the raw file agrees too.
    raw = load_all(tiny_mx)
    d = dequant(raw["model.layers.1.mlp.experts.gate_up_proj_blocks"],
                raw["model.layers.1.mlp.experts.gate_up_proj_scales"])  # [E, 2I, H]
    np.testing.assert_array_equal(d.transpose(0, 2, 1), gu.float().numpy())


@pytest.fixture(scope="module")
def real_shapes(gossamer, tmp_path_factory, seed):
    """The real 20b/120b layer shapes with fewer layers/experts and a small vocab."""
    out = tmp_path_factory.mktemp("synth") / "real"
    gossamer("synth", "--preset", "120b", "--layers", "1", "--experts", "4", "--vocab", "2048",
             "--out", out, "--seed", seed, "--quiet")
    return load_all(out)


def rel(a, b):
    return abs(a - b) / abs(b)


def test_statistics_as_documented(real_shapes):
    w = {k: v.float().numpy() if v.dtype == torch.bfloat16 else v for k, v in real_shapes.items()}
    H, I, p = 2880, 2880, "model.layers.0."
    assert rel(w["model.embed_tokens.weight"].std(), 1.0) < 0.02
    assert rel(w["lm_head.weight"].std(), H ** -0.5) < 0.02
    for name, fan_in in [("q_proj", H), ("k_proj", H), ("v_proj", H), ("o_proj", 4096)]:
        x = w[p + f"self_attn.{name}.weight"]
        assert rel(x.std(), fan_in ** -0.5) < 0.02, name
        assert abs(x.mean()) < 0.01 * fan_in ** -0.5, name
        assert rel(w[p + f"self_attn.{name}.bias"].std(), 0.1) < 0.1, name
    for n in [p + "input_layernorm.weight", p + "post_attention_layernorm.weight",
              "model.norm.weight"]:
        assert abs(w[n].mean() - 1) < 0.02 and rel(w[n].std(), 0.1) < 0.1, n
    sinks = w[p + "self_attn.sinks"]
    assert sinks.shape == (64,) and sinks.min() >= -3 and sinks.max() <= 3
    assert (sinks < -1).any() and (sinks > 1).any()
    assert rel(w[p + "mlp.router.weight"].std(), H ** -0.5) < 0.02
    for proj, fan_in in [("gate_up_proj", H), ("down_proj", I)]:
        blocks, scales = real_shapes[p + f"mlp.experts.{proj}_blocks"], \
            real_shapes[p + f"mlp.experts.{proj}_scales"]
        codes = np.concatenate([blocks.numpy() & 0xF, blocks.numpy() >> 4]).ravel()
        freq = np.bincount(codes, minlength=16) / codes.size
        assert np.all(np.abs(freq - 1 / 16) < 0.005), freq  # uniform codes
        exps = scales.numpy().astype(int) - 127
        assert len(np.unique(exps)) >= 3 and exps.min() >= -12 and exps.max() <= -5, \
            np.unique(exps)
        d = dequant(blocks, scales)
        ratio = d.std() / fan_in ** -0.5
        print(f"{proj}: dequantised std / (1/sqrt(fan_in)) = {ratio:.3f}")
        assert 0.95 < ratio < 1.05 and abs(d.mean()) < 0.01 * fan_in ** -0.5, proj
        assert rel(w[p + f"mlp.experts.{proj}_bias"].std(), 0.1) < 0.05


def test_forward_is_healthy_at_real_shapes(gossamer, tmp_path_factory, seed):
    """Two 120b-shaped layers (bf16 experts) through transformers: activations stay finite and
    O(1), logits are spread, and the router picks different experts for different tokens."""
    from transformers import AutoModelForCausalLM
    out = tmp_path_factory.mktemp("synth") / "fwd"
    gossamer("synth", "--preset", "120b", "--layers", "2", "--experts", "4",
             "--experts-per-token", "2", "--vocab", "4096", "--expert-format", "bf16", "--out",
             out, "--seed", seed, "--quiet")
    m = AutoModelForCausalLM.from_pretrained(out, dtype=torch.float32)
    g = torch.Generator().manual_seed(seed % 2**32)
    ids = torch.randint(0, 4096, (1, 48), generator=g)
    with torch.no_grad():
        r = m(ids, output_hidden_states=True, output_router_logits=True)
    for i, h in enumerate(r.hidden_states):
        rms = h.pow(2).mean().sqrt().item()
        print(f"hidden state {i}: rms {rms:.3f}")
        assert torch.isfinite(h).all() and 0.3 < rms < 30, (i, rms)
    logits = r.logits[0]
    assert torch.isfinite(logits).all() and 0.3 < logits.std().item() < 3
    top_p = logits.softmax(-1).max(-1).values
    assert top_p.median() < 0.5, top_p
    for layer_logits in r.router_logits:
        top1 = layer_logits.argmax(-1)
        assert len(set(top1.tolist())) >= 3, top1  # >= 3 of the 4 experts win some token


# Runs argv[1:] and prints the child's peak RSS in bytes. A fresh small interpreter does the
# fork: Linux carries a forking process's RSS high-water mark into the child's ru_maxrss, so
# forking from the (large) pytest process would report pytest's size.
PEAK_RSS_LAUNCHER = """
import os, sys
pid = os.fork()
if pid == 0:
    os.execv(sys.argv[1], sys.argv[1:])
_, status, usage = os.wait4(pid, 0)
print(os.waitstatus_to_exitcode(status), usage.ru_maxrss * 1024)
"""


def test_peak_rss_bounded(tmp_path):
    """A ~1 GB checkpoint is streamed: peak RSS stays a small fraction of the output size."""
    out = tmp_path / "big"
    p = subprocess.run([sys.executable, "-c", PEAK_RSS_LAUNCHER, gossamer_bin(), "synth",
                        "--preset", "20b", "--layers", "1", "--vocab", "40960", "--out", str(out),
                        "--quiet"], capture_output=True, text=True, timeout=600)
    rc, peak = map(int, p.stdout.split())
    assert rc == 0, p.stderr
    size = sum(f.stat().st_size for f in out.iterdir())
    print(f"synth wrote {size / 1e9:.2f} GB with peak RSS {peak / 1e6:.1f} MB")
    assert size > 0.9e9 and peak < 150e6


@pytest.mark.parametrize("args,rc,needle", [
    (["--preset", "7b"], 2, "unknown preset '7b'"),
    (["--expert-format", "fp8"], 2, "--expert-format"),
    (["--shard-size", "lots"], 2, "--shard-size"),
    (["--kv-heads", "3"], 2, "num_key_value_heads"),
    (["--hidden", "48"], 2, "hidden_size"),
    (["--tokenizer", "/nonexistent/tokenizer.json"], 2, "/nonexistent/tokenizer.json"),
])
def test_cli_errors(gossamer, tmp_path, args, rc, needle):
    p = gossamer("synth", "--out", tmp_path / "x", *args, check=False)
    assert p.returncode == rc and needle in p.stderr.decode(), p.stderr.decode()
    assert not (tmp_path / "x" / "config.json").exists()
