"""Shared fixtures for the Python oracle tests.

The oracles (transformers, tokenizers, tiktoken, openai-harmony, openai) are independent of
gossamer; these tests drive the `gossamer` binary and compare against them.
"""
import base64
import json
import os
import pathlib
import random
import subprocess

import pytest

REPO = pathlib.Path(__file__).resolve().parents[2]
SHARED = REPO.parent / "shared"


def fresh_seed(what: str) -> int:
    """The seed of a randomized test: a fresh one per run, or $GOSSAMER_SEED to replay a failure
    (the rule of the C++ tests' common/test_seed.h); printed as "[seed] WHAT: GOSSAMER_SEED=N"."""
    env = os.environ.get("GOSSAMER_SEED")
    seed = int(env) if env else random.SystemRandom().randrange(2**63)
    print(f"[seed] {what}: GOSSAMER_SEED={seed}")
    return seed


def gossamer_bin() -> str:
    return os.environ.get("GOSSAMER_BIN", str(REPO / "build" / "gossamer"))


@pytest.fixture(scope="session")
def gossamer():
    """Returns a function running `gossamer ARGS...`; raises with stderr on failure."""
    binary = gossamer_bin()
    if not os.path.exists(binary):
        pytest.fail(f"gossamer binary not found at {binary}; build first (scripts/setup.sh)")

    def run(*args, input=None, check=True, timeout=600):
        p = subprocess.run([binary, *map(str, args)], input=input, capture_output=True,
                           timeout=timeout)
        if check and p.returncode != 0:
            raise AssertionError(f"gossamer {' '.join(map(str, args))} failed "
                                 f"({p.returncode}):\n{p.stderr.decode(errors='replace')}")
        return p

    return run


@pytest.fixture(scope="session")
def tokenizer_json() -> pathlib.Path:
    p = SHARED / "tokenizer" / "tokenizer.json"
    if not p.exists():
        pytest.fail(f"real gpt-oss tokenizer not found at {p}")
    return p


# ---- openai-harmony, offline (test_harmony_*.py, test_server_chat.py) -----------------------
# openai-harmony reads the o200k vocabulary from $TIKTOKEN_ENCODINGS_BASE; we write it from the
# real tokenizer.json (the file's sha256 is checked by openai-harmony), so nothing is downloaded.

def _bytes_to_unicode():
    bs = (list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) +
          list(range(ord("®"), ord("ÿ") + 1)))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return {chr(c): b for b, c in zip(bs, cs)}


@pytest.fixture(scope="session")
def harmony(tokenizer_json, tmp_path_factory):
    vocab = json.loads(tokenizer_json.read_text())["model"]["vocab"]
    dec = _bytes_to_unicode()
    lines = [base64.b64encode(bytes(dec[ch] for ch in tok)).decode() + f" {rank}\n"
             for tok, rank in sorted(vocab.items(), key=lambda kv: kv[1])]
    base = tmp_path_factory.mktemp("tiktoken")
    (base / "o200k_base.tiktoken").write_text("".join(lines))
    os.environ["TIKTOKEN_ENCODINGS_BASE"] = str(base)
    os.environ["TIKTOKEN_RS_CACHE_DIR"] = str(base)
    import openai_harmony as oh
    return oh, oh.load_harmony_encoding(oh.HarmonyEncodingName.HARMONY_GPT_OSS)


# ---- `gossamer serve` with the demo model (test_server*.py; server_util.py) ------------------

@pytest.fixture(scope="module")
def cache(tmp_path_factory):
    """One demo-model cache dir for every server of a test module (synthesised once)."""
    return tmp_path_factory.mktemp("cache")


# ---- synthetic checkpoints (test_checkpoint_errors_*.py; ckpt_util.py) ----------------------

@pytest.fixture(scope="session")
def bases(tmp_path_factory):
    """Two small valid checkpoints for the cases to break: `mx` (single-file MXFP4) and
    `sharded` (bf16 experts in 4 shards with model.safetensors.index.json)."""
    from ckpt_util import INDEX, SH3, gossamer_cmd  # here, not on top: ckpt_util imports conftest
    root = tmp_path_factory.mktemp("bases")
    synth = ["synth", "--preset", "tiny", "--vocab", "512", "--quiet", "--threads", "1"]
    for name, extra in (("mx", []), ("sharded", ["--expert-format", "bf16", "--shard-size",
                                                   "100K"])):
        rc, _, err = gossamer_cmd(*synth, *extra, "--out", root / name)
        assert rc == 0, err
    assert (root / "sharded" / INDEX).exists() and (root / "sharded" / SH3).exists()
    return root
