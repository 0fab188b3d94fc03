"""CI-sized run of the loopback load test (tests/load/load_test.py): 64 concurrent streaming
clients, 160 requests, 30% random disconnects; bounded to 120 s. It serves the demo model's
config through the weights-free FakeRunner backend (`--backend fake`) so that the 2-core CI
measures the server and scheduler rather than the CPU forward pass; the hand-run default
configuration uses the real CPU backend."""
import pathlib
import subprocess
import sys

from conftest import gossamer_bin

LOAD = pathlib.Path(__file__).resolve().parents[2] / "tests" / "load" / "load_test.py"


def test_load_ci_size(tokenizer_json, tmp_path):
    p = subprocess.run(
        [sys.executable, str(LOAD), "--bin", gossamer_bin(), "--tokenizer", str(tokenizer_json),
         "--clients", "64", "--requests", "160", "--max-tokens", "16", "--time-limit", "120",
         "--serve-args",
         "--backend fake --max-num-seqs 32 --max-queue 512 --default-max-tokens 16"],
        capture_output=True, text=True, timeout=180,
        env={"GOSSAMER_CACHE": str(tmp_path), "PATH": "/usr/bin:/bin"})
    print(p.stdout)
    assert p.returncode == 0, p.stdout + p.stderr
