#!/usr/bin/env python3
"""Single-threaded encode throughput: gossamer (bench binary) vs tiktoken vs HF tokenizers.

  .venv/bin/python bench/tokenizer_bench.py [--bin build/tokenizer_bench]
      [--tokenizer ../shared/tokenizer/tokenizer.json] [--input FILE] [--iters 3]

Without --input, the text is the committed tokenizer corpus (tests/data/tokenizer) repeated to
about 4 MB. Prints a markdown table of MB/s (1e6 bytes/s) and tokens/s (best of --iters).
"""
import argparse
import json
import os
import pathlib
import subprocess
import tempfile
import time

REPO = pathlib.Path(__file__).resolve().parents[1]


def build_text(target_bytes):
    data = REPO / "tests" / "data" / "tokenizer"
    parts = [(data / n).read_text(encoding="utf-8") for n in ("multilingual.txt", "code.txt", "emoji.txt")]
    with open(data / "edge_cases.jsonl", encoding="utf-8") as f:
        parts.append("\n".join(json.loads(l) for l in f if l.strip()))
    unit = "\n\n".join(parts)
    return (unit * (target_bytes // len(unit.encode()) + 1))


def best_of(fn, iters):
    best, out = 1e30, None
    for _ in range(iters):
        t = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - t)
    return best, out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", default=str(REPO / "build" / "tokenizer_bench"))
    ap.add_argument("--tokenizer", default=str(REPO.parent / "shared" / "tokenizer" / "tokenizer.json"))
    ap.add_argument("--input")
    ap.add_argument("--iters", type=int, default=3)
    args = ap.parse_args()
    os.environ.setdefault("RAYON_NUM_THREADS", "1")  # HF tokenizers: single thread

    import tiktoken
    from tokenizers import Tokenizer

    text = pathlib.Path(args.input).read_text(encoding="utf-8") if args.input else build_text(4_000_000)
    nbytes = len(text.encode())
    with tempfile.NamedTemporaryFile("w", encoding="utf-8", suffix=".txt", delete=False) as f:
        f.write(text)
        path = f.name
    try:
        out = subprocess.run([args.bin, "--tokenizer", args.tokenizer, "--input", path,
                              "--iters", str(args.iters)], check=True, capture_output=True).stdout
    finally:
        os.unlink(path)
    g = json.loads(out)
    rows = [("gossamer", g["seconds"], g["tokens"])]

    spec = json.loads(pathlib.Path(args.tokenizer).read_text(encoding="utf-8"))
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
    enc = tiktoken.Encoding("o200k_bench", pat_str=pat, mergeable_ranks=ranks, special_tokens={})
    s, ids = best_of(lambda: enc.encode_ordinary(text), args.iters)
    rows.append(("tiktoken", s, len(ids)))
    hf = Tokenizer.from_file(args.tokenizer)
    s, e = best_of(lambda: hf.encode(text, add_special_tokens=False), args.iters)
    rows.append(("HF tokenizers", s, len(e.ids)))

    print(f"input: {nbytes} bytes, single thread, best of {args.iters}\n")
    print("| tokenizer | MB/s | tokens/s | tokens |")
    print("|---|---:|---:|---:|")
    for name, sec, n in rows:
        print(f"| {name} | {nbytes / sec / 1e6:.2f} | {n / sec:,.0f} | {n} |")
    if len({r[2] for r in rows}) != 1:
        print("\nWARNING: token counts differ between tokenizers")


if __name__ == "__main__":
    main()
