#!/usr/bin/env python3
"""Encode throughput: gossamer (bench binary) vs tiktoken vs HF tokenizers, single thread.

  .venv/bin/python bench/tokenizer_bench.py [--bin build/tokenizer_bench]
      [--tokenizer ../shared/tokenizer/tokenizer.json] [--corpus NAME ...] [--input FILE]
      [--size 4000000] [--iters 3] [--threads 2] [--no-hf] [--dump DIR]

Corpora (bench/tokenizer_corpora.py, deterministic): multilingual, code, english, whitespace,
cjk, emoji; --input FILE benchmarks one file instead. Every tokenizer encodes the same text on
one thread (best of --iters); gossamer's ids must equal tiktoken's and the token count must
equal HF's. The extra column "gossamer
parallel" is gossamer's encode_parallel with --threads threads (same ids, checked). MB = 1e6
bytes. --dump DIR writes the corpora as DIR/NAME.txt and exits.
"""
import argparse
import json
import os
import pathlib
import subprocess
import sys
import tempfile
import time

REPO = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import tokenizer_corpora  # noqa: E402


def best_of(fn, iters):
    best, out = 1e30, None
    for _ in range(iters):
        t = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - t)
    return best, out


def tiktoken_encoding(tokenizer_json):
    import tiktoken
    spec = json.loads(pathlib.Path(tokenizer_json).read_text(encoding="utf-8"))
    printable = list(range(0x21, 0x7F)) + list(range(0xA1, 0xAD)) + list(range(0xAE, 0x100))
    table, extra = {}, 0
    for b in range(256):
        if b in printable:
            table[chr(b)] = b
        else:
            table[chr(256 + extra)] = b
            extra += 1
    ranks = {bytes(table[c] for c in t): i for t, i in spec["model"]["vocab"].items()}
    pat = spec["pre_tokenizer"]["pretokenizers"][0]["pattern"]["Regex"]
    return tiktoken.Encoding("o200k_bench", pat_str=pat, mergeable_ranks=ranks, special_tokens={})


def run_gossamer(args, text):
    """Runs the bench binary; returns its JSON line and its single-thread ids."""
    import numpy as np
    with tempfile.TemporaryDirectory() as tmp:
        path, ids_path = os.path.join(tmp, "input.txt"), os.path.join(tmp, "ids.bin")
        pathlib.Path(path).write_text(text, encoding="utf-8")
        cmd = [args.bin, "--tokenizer", args.tokenizer, "--input", path, "--iters", str(args.iters),
               "--threads", str(args.threads), "--ids-out", ids_path]
        g = json.loads(subprocess.run(cmd, check=True, capture_output=True).stdout)
        return g, np.fromfile(ids_path, dtype="<i4")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", default=str(REPO / "build" / "tokenizer_bench"))
    ap.add_argument("--tokenizer", default=str(REPO.parent / "shared" / "tokenizer" / "tokenizer.json"))
    ap.add_argument("--corpus", action="append", choices=tokenizer_corpora.NAMES)
    ap.add_argument("--input")
    ap.add_argument("--size", type=int, default=4_000_000)
    ap.add_argument("--iters", type=int, default=3)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--no-hf", action="store_true")
    ap.add_argument("--dump")
    args = ap.parse_args()
    os.environ.setdefault("RAYON_NUM_THREADS", "1")  # HF tokenizers: single thread

    if args.input:
        corpora = [(pathlib.Path(args.input).name, lambda: pathlib.Path(args.input).read_text(encoding="utf-8"))]
    else:
        corpora = [(n, lambda n=n: tokenizer_corpora.build(n, args.size, args.tokenizer))
                   for n in (args.corpus or tokenizer_corpora.NAMES)]
    if args.dump:
        pathlib.Path(args.dump).mkdir(parents=True, exist_ok=True)
        for name, make in corpora:
            (pathlib.Path(args.dump) / f"{name}.txt").write_text(make(), encoding="utf-8")
        return 0

    enc = tiktoken_encoding(args.tokenizer)
    hf = None
    if not args.no_hf:
        from tokenizers import Tokenizer
        hf = Tokenizer.from_file(args.tokenizer)
    rows, ok = [], True
    for name, make in corpora:
        text = make()
        nbytes = len(text.encode())
        g, g_ids = run_gossamer(args, text)
        t_s, t_ids = best_of(lambda: enc.encode_ordinary(text), args.iters)
        same = g["parallel_same_ids"] and g_ids.tolist() == t_ids
        h_mbs = "-"
        if hf is not None:
            h_s, h_enc = best_of(lambda: hf.encode(text, add_special_tokens=False), args.iters)
            h_mbs = f"{nbytes / h_s / 1e6:.2f}"
            same = same and len(h_enc.ids) == g["tokens"]
        ok = ok and same
        g_mbs, t_mbs = g["mb_per_s"], nbytes / t_s / 1e6
        rows.append(f"| {name} | {nbytes / 1e6:.2f} | {g['tokens']:,} | {g_mbs:.2f} | {t_mbs:.2f} | {h_mbs} | "
                    f"**{g_mbs / t_mbs:.2f}x** | {g['parallel_mb_per_s']:.2f} | {'yes' if same else 'NO'} |")
        print(rows[-1], file=sys.stderr, flush=True)

    print(f"single thread, best of {args.iters}; parallel column: encode_parallel, {args.threads} threads\n")
    print("| corpus | MB | tokens | gossamer MB/s | tiktoken MB/s | HF MB/s | gossamer / tiktoken "
          f"| gossamer parallel ({args.threads} thr) MB/s | same ids |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---|")
    print("\n".join(rows))
    if not ok:
        print("\nERROR: token ids differ between tokenizers")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
