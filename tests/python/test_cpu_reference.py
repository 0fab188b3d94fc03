"""The CPU reference engine against Hugging Face transformers (GptOssForCausalLM, float32, eager).

For several small random checkpoints written by `gossamer synth` (MXFP4 experts, dequantized by
transformers itself on CPU) we compare the logits of every position (`gossamer logits`) and a
32-token greedy continuation (`gossamer run --temperature 0` against greedy decoding by full
transformers forwards). The bf16 expert layout of the same weights must give the same logits as
the MXFP4 layout.

Configs cover GQA 4:1 / 2:1 / 1:1, sliding windows shorter than the sequence, sequences past the
YaRN original context (original_max_position_embeddings patched to 16-32), top-k 1..4 of 3..8
experts, and sinks of both signs (synth draws them from U(-3, 3)); three more configs per run
are drawn at random (held-out shapes: random layer types, head_dim 16-64, 1-4 kv heads, top-1..4
of 2-12 experts), each written in a random config.json form (transformers-5 rope_parameters;
fields left to GptOssConfig's defaults such as head_dim 64 or an original context taken from
max_position_embeddings; yarn attention_factor / mscale; rope_scaling null, i.e. the default
yarn) and with some tensors as F16 / F32.
"""
import json
import os
import pathlib

import numpy as np
import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

# (name, synth overrides, original_max_position_embeddings, rope truncate, sequence length)
CONFIGS = [
    ("gqa4_k2", dict(layers=2, heads=8, kv_heads=2, head_dim=16, hidden=64, intermediate=64,
                     experts=4, experts_per_token=2, sliding_window=8), 16, False, 40),
    ("gqa2_k4", dict(layers=3, heads=4, kv_heads=2, head_dim=16, hidden=96, intermediate=32,
                     experts=8, experts_per_token=4, sliding_window=5), 32, True, 48),
    ("mha_k1", dict(layers=2, heads=4, kv_heads=4, head_dim=32, hidden=128, intermediate=64,
                    experts=3, experts_per_token=1, sliding_window=16), 16, False, 36),
]
VOCAB = 1024
GREEDY_TOKENS = 32
SUMMARY = []


def _seed() -> int:
    s = int.from_bytes(os.urandom(4), "little")
    print(f"[seed] {s}")
    return s


def _synth(gossamer, out: pathlib.Path, overrides: dict, seed: int, orig_ctx: int, truncate: bool,
           expert_format: str = "mxfp4", layer_types: list = None) -> pathlib.Path:
    args = ["synth", "--out", out, "--vocab", VOCAB, "--seed", seed, "--quiet",
            "--expert-format", expert_format]
    for k, v in overrides.items():
        args += ["--" + k.replace("_", "-"), v]
    gossamer(*args)
    cfg_path = out / "config.json"
    cfg = json.loads(cfg_path.read_text())
    cfg["rope_scaling"]["original_max_position_embeddings"] = orig_ctx
    cfg["rope_scaling"]["truncate"] = truncate
    if layer_types is not None:
        cfg["layer_types"] = layer_types
    cfg_path.write_text(json.dumps(cfg, indent=2))
    return out


def _load_hf(path: pathlib.Path):
    kwargs = dict(dtype=torch.float32, attn_implementation="eager")
    cfg = json.loads((path / "config.json").read_text())
    if "quantization_config" in cfg:
        kwargs["quantization_config"] = transformers.Mxfp4Config(dequantize=True)
    model = transformers.GptOssForCausalLM.from_pretrained(str(path), **kwargs)
    model.eval()
    experts = model.model.layers[0].mlp.experts
    assert experts.gate_up_proj.dtype == torch.float32, "transformers did not dequantize MXFP4"
    return model


def _ours_logits(gossamer, path, tokens, tmp: pathlib.Path) -> np.ndarray:
    out = tmp / "logits.npy"
    gossamer("logits", "--model", path, "--tokens", ",".join(map(str, tokens)), "--out", out)
    return np.load(out)


def _rel_per_position(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return np.linalg.norm(a.astype(np.float64) - b, axis=-1) / np.linalg.norm(b, axis=-1)


# Rewrites of config.json that transformers (5.x) reads as a given model: each must give gossamer
# the model transformers builds from the same file. `orig_ctx` is the yarn original context the
# synth config was patched to.
def _form_rope_parameters(cfg, rng, orig_ctx):  # transformers-5 save_pretrained form
    rs = cfg.pop("rope_scaling")
    rs["rope_theta"] = cfg.pop("rope_theta")
    cfg["rope_parameters"] = rs


def _form_implicit_fields(cfg, rng, orig_ctx):  # GptOssConfig defaults / derived values
    rs = cfg["rope_scaling"]
    del rs["original_max_position_embeddings"]  # falls back to max_position_embeddings
    cfg["max_position_embeddings"] = orig_ctx
    if rs["truncate"]:
        del rs["truncate"]  # absent reads as true
    rs["type"] = rs.pop("rope_type")  # the legacy key
    for key, default in (("head_dim", 64), ("rms_norm_eps", 1e-5), ("rope_theta", 150000.0)):
        if cfg[key] == default:
            del cfg[key]


def _form_attention_factor(cfg, rng, orig_ctx):  # yarn cos/sin scale given explicitly
    rs = cfg["rope_scaling"]
    if rng.integers(0, 2):
        rs["attention_factor"] = float(rng.uniform(0.5, 2.0))
    else:
        rs["mscale"], rs["mscale_all_dim"] = float(rng.uniform(0.5, 2)), float(rng.uniform(0.5, 2))


def _form_rope_default(cfg, rng, orig_ctx):  # null: GptOssConfig's default yarn; no type: plain
    cfg["rope_scaling"] = None if rng.integers(0, 2) else {"factor": 4.0}


CONFIG_FORMS = [None, _form_rope_parameters, _form_implicit_fields, _form_attention_factor,
                _form_rope_default]


def _cast_float_tensors(path: pathlib.Path, rng):
    """Rewrites the checkpoint with each BF16 tensor kept, or cast to F16 or F32 (what
    save_pretrained of a float16 / float32 model writes)."""
    from safetensors.torch import load_file, save_file
    for f in sorted(path.glob("*.safetensors")):
        tensors = load_file(str(f))
        for k, t in tensors.items():
            if t.dtype == torch.bfloat16:
                tensors[k] = t.to([torch.bfloat16, torch.float16, torch.float32][rng.integers(0, 3)])
        save_file(tensors, str(f), metadata={"format": "pt"})


@pytest.mark.parametrize("name,overrides,orig_ctx,truncate,seq_len", CONFIGS,
                         ids=[c[0] for c in CONFIGS])
def test_logits_and_greedy_match_transformers(gossamer, tmp_path, name, overrides, orig_ctx,
                                              truncate, seq_len):
    _check_against_transformers(gossamer, tmp_path, name, overrides, orig_ctx, truncate, seq_len,
                                _seed())


def _random_config(rng) -> tuple:
    """A config drawn from wider ranges than CONFIGS (held-out shapes): 1-4 layers of random
    sliding / full types, 1-4 kv heads with 1-4 query heads each, head_dim 16 / 32 / 64, hidden
    and intermediate multiples of 32, 2-12 experts top-1..4, window 3-20."""
    kv = int(rng.integers(1, 5))
    experts = int(rng.integers(2, 13))
    layers = int(rng.integers(1, 5))
    overrides = dict(layers=layers, heads=kv * int(rng.integers(1, 5)), kv_heads=kv,
                     head_dim=int(rng.choice([16, 32, 64])), hidden=32 * int(rng.integers(1, 5)),
                     intermediate=32 * int(rng.integers(1, 4)), experts=experts,
                     experts_per_token=int(rng.integers(1, min(4, experts) + 1)),
                     sliding_window=int(rng.integers(3, 21)))
    types = [str(rng.choice(["sliding_attention", "full_attention"])) for _ in range(layers)]
    return (overrides, types, int(rng.choice([16, 32])), bool(rng.integers(0, 2)),
            int(rng.integers(24, 49)))


@pytest.mark.parametrize("draw", range(3))
def test_random_configs_match_transformers(gossamer, tmp_path, draw):
    """Random shapes, each also written in a random (equivalent or default-relying) config.json
    form and with some float tensors as F16 / F32."""
    seed = _seed()
    rng = np.random.default_rng(seed)
    overrides, types, orig_ctx, truncate, seq_len = _random_config(rng)
    form = CONFIG_FORMS[int(rng.integers(0, len(CONFIG_FORMS)))]
    cast = bool(rng.integers(0, 2))
    print(f"random config {draw}: {overrides}, layer types {types}, form "
          f"{form.__name__ if form else None}, cast {cast}")
    _check_against_transformers(gossamer, tmp_path, f"random{draw}", overrides, orig_ctx,
                                truncate, seq_len, seed, types, form, cast)


@pytest.mark.parametrize("form", CONFIG_FORMS[1:], ids=lambda f: f.__name__[len("_form_"):])
def test_config_forms_match_transformers(gossamer, tmp_path, form):
    """Every config.json form of CONFIG_FORMS on a small random config, F16 / F32 tensors too."""
    seed = _seed()
    rng = np.random.default_rng(seed)
    overrides, types, orig_ctx, truncate, seq_len = _random_config(rng)
    overrides["head_dim"] = 64  # so that _form_implicit_fields may drop it
    _check_against_transformers(gossamer, tmp_path, form.__name__, overrides, orig_ctx, truncate,
                                seq_len, seed, types, form, cast=True)


def _check_against_transformers(gossamer, tmp_path, name, overrides, orig_ctx, truncate, seq_len,
                                seed, layer_types=None, form=None, cast=False):
    rng = np.random.default_rng(seed)
    path = _synth(gossamer, tmp_path / "mxfp4", overrides, seed, orig_ctx, truncate,
                  layer_types=layer_types)
    if form is not None:
        cfg = json.loads((path / "config.json").read_text())
        form(cfg, rng, orig_ctx)
        (path / "config.json").write_text(json.dumps(cfg, indent=2))
        print(f"config form {form.__name__}: {json.dumps(cfg)}")
    if cast:
        _cast_float_tensors(path, rng)
    tokens = rng.integers(0, VOCAB, size=seq_len).tolist()

    ours = _ours_logits(gossamer, path, tokens, tmp_path)
    model = _load_hf(path)
    with torch.no_grad():
        ref = model(torch.tensor([tokens])).logits[0].double().numpy()
    assert ours.shape == ref.shape == (seq_len, VOCAB)
    rel = _rel_per_position(ours, ref)
    worst = float(rel.max())

    # Greedy continuation of the first 8 tokens: gossamer run (our KV-cached decode) against
    # greedy decoding by full transformers forwards without a cache (the model's definition).
    # Not transformers' generate(): with 5.23.0 its first-step logits for an 8-token prompt and
    # sliding window 8 differed from its own forward on the same tokens by ~0.3 (seed 846272562:
    # generate chose token 81, forward and gossamer 922), so it is not a reference here.
    prompt = tokens[:8]
    ref_cont, gaps = _hf_greedy(model, prompt, GREEDY_TOKENS)
    p = gossamer("run", "--model", path, "--tokens", ",".join(map(str, prompt)), "-n",
                 GREEDY_TOKENS, "--temperature", 0, "--ids", "--ignore-eos")
    our_cont = [int(t) for t in p.stdout.decode().split()]
    matched = 0
    for a, b in zip(our_cont, ref_cont):
        if a != b:
            break
        matched += 1

    line = (f"{name}: worst per-position rel err {worst:.3g} over {seq_len} positions "
            f"(orig ctx {orig_ctx}, window {overrides['sliding_window']}); greedy "
            f"{matched}/{GREEDY_TOKENS} tokens identical")
    print(line)
    SUMMARY.append(line)
    assert worst <= 1e-4, f"{name}: positions over 1e-4: {np.nonzero(rel > 1e-4)[0].tolist()}"
    assert len(our_cont) == GREEDY_TOKENS, f"{name}: {len(our_cont)} tokens generated"
    # The rule: identical unless the reference's top-2 logits are near-tied where the
    # two continuations part (the logits agree to ~1e-6, so only such a tie can flip a choice).
    if matched < GREEDY_TOKENS:
        assert gaps[matched] < 1e-4, (f"{name}: greedy diverges at token {matched} with a top-2 "
                                      f"gap of {gaps[matched]:.3g} in the reference")


def _hf_greedy(model, prompt: list, n: int) -> tuple:
    """Greedy tokens by n full forwards (no KV cache), and each step's top-2 logit gap."""
    seq, gaps = list(prompt), []
    with torch.no_grad():
        for _ in range(n):
            logits = model(torch.tensor([seq]), use_cache=False).logits[0, -1].double()
            top2 = torch.topk(logits, 2).values
            gaps.append(float(top2[0] - top2[1]))
            seq.append(int(logits.argmax()))
    return seq[len(prompt):], gaps


def test_bf16_and_mxfp4_layouts_agree(gossamer, tmp_path):
    """The bf16 expert layout of the same weights gives the same logits (ours and transformers)."""
    seed = _seed()
    name, overrides, orig_ctx, truncate, seq_len = CONFIGS[1]
    mx = _synth(gossamer, tmp_path / "mxfp4", overrides, seed, orig_ctx, truncate)
    bf = _synth(gossamer, tmp_path / "bf16", overrides, seed, orig_ctx, truncate, "bf16")
    tokens = np.random.default_rng(seed).integers(0, VOCAB, size=seq_len).tolist()
    a = _ours_logits(gossamer, mx, tokens, tmp_path)
    b = _ours_logits(gossamer, bf, tokens, tmp_path)
    rel_layouts = float(_rel_per_position(a, b.astype(np.float64)).max())
    with torch.no_grad():
        ref = _load_hf(bf)(torch.tensor([tokens])).logits[0].double().numpy()
    rel_hf = float(_rel_per_position(b, ref).max())
    line = (f"bf16 vs mxfp4 layout ({name}): worst rel err {rel_layouts:.3g}; bf16 checkpoint vs "
            f"transformers {rel_hf:.3g}")
    print(line)
    SUMMARY.append(line)
    assert rel_layouts <= 1e-5
    assert rel_hf <= 1e-4


def test_logits_errors_are_messages(gossamer, tmp_path):
    """Bad token ids and a missing model are error messages with exit code 1, not crashes."""
    seed = _seed()
    path = _synth(gossamer, tmp_path / "m", CONFIGS[0][1], seed, 16, False)
    p = gossamer("logits", "--model", path, "--tokens", f"1,{VOCAB}", "--out",
                 tmp_path / "x.npy", check=False)
    assert p.returncode == 1 and b"outside the vocabulary" in p.stderr, p.stderr
    p = gossamer("logits", "--model", path, "--tokens", "1,x", "--out", tmp_path / "x.npy",
                 check=False)
    assert p.returncode == 1 and b"not a token id" in p.stderr, p.stderr
    p = gossamer("run", "--model", tmp_path / "nope", "--tokens", "1", check=False)
    assert p.returncode == 1 and p.stderr, p.stderr


def teardown_module(module):
    if SUMMARY:
        print("\n== CPU reference vs transformers ==\n" + "\n".join(SUMMARY))
