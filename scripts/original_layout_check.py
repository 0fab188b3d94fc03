#!/usr/bin/env python3
"""Serves one synthetic model in both checkpoint layouts (Hugging Face, and OpenAI's own
`original/` layout written by tests/python/test_original_layout.py's converter) and requires the
same greedy completion and logprobs from both. For a backend the pytest suite cannot reach (the
GPU: scripts/gpu.sh section `original`); needs torch and safetensors for the conversion.

  scripts/original_layout_check.py --bin build/gossamer --tokenizer tokenizer.json --backend cuda
"""
import argparse
import importlib.util
import json
import pathlib
import socket
import subprocess
import sys
import tempfile
import time
import types
import urllib.request

REPO = pathlib.Path(__file__).resolve().parents[1]


def converter():
    sys.modules.setdefault("conftest", types.SimpleNamespace(fresh_seed=lambda what: 0))
    sys.modules.setdefault("pytest", types.SimpleNamespace(mark=types.SimpleNamespace(
        parametrize=lambda *a, **k: (lambda f: f))))
    path = REPO / "tests" / "python" / "test_original_layout.py"
    spec = importlib.util.spec_from_file_location("original_layout", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.to_original


def complete(args, model_dir):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    srv = subprocess.Popen([args.bin, "serve", "--model", str(model_dir), "--backend", args.backend,
                            "--port", str(port)], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        base = f"http://127.0.0.1:{port}"
        for _ in range(240):
            try:
                urllib.request.urlopen(base + "/health", timeout=1)
                break
            except OSError:
                if srv.poll() is not None:
                    raise SystemExit(f"serve {model_dir} exited: {srv.stderr.read().decode()}")
                time.sleep(0.25)
        name = json.load(urllib.request.urlopen(base + "/v1/models"))["data"][0]["id"]
        body = {"model": name, "prompt": [1000, 2000, 3000, 4000, 5000], "max_tokens": 24,
                "temperature": 0, "ignore_eos": True, "logprobs": 2}
        req = urllib.request.Request(base + "/v1/completions", json.dumps(body).encode(),
                                     {"Content-Type": "application/json"})
        return name, json.load(urllib.request.urlopen(req, timeout=120))["choices"][0]
    finally:
        srv.terminate()
        srv.wait()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    ap.add_argument("--tokenizer", required=True)
    ap.add_argument("--backend", default="cuda")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        snap = pathlib.Path(tmp) / "snap"
        subprocess.run([args.bin, "synth", "--preset", "tiny", "--layers", "4", "--head-dim", "64",
                        "--out", str(snap), "--tokenizer", args.tokenizer, "--quiet"], check=True)
        converter()(snap, snap / "original")
        (n1, a), (n2, b) = complete(args, snap), complete(args, snap / "original")
    same = a["text"] == b["text"] and a["logprobs"] == b["logprobs"] and n1 == n2
    print(f"{'ok' if same else 'FAIL'}: original/ layout on --backend {args.backend}: "
          f"served as {n2!r} ({n1!r}), text {b['text'][:40]!r} ({'same' if same else 'differs'})")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
