"""Shared fixtures for the Python oracle tests.

The oracles (transformers, tokenizers, tiktoken, openai-harmony, openai) are independent of
gossamer; these tests drive the `gossamer` binary and compare against them.
"""
import os
import pathlib
import subprocess

import pytest

REPO = pathlib.Path(__file__).resolve().parents[2]
SHARED = REPO.parent / "shared"


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
