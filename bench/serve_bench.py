#!/usr/bin/env python3
"""Loopback benchmark client for `gossamer serve`.

For each concurrency level (default 1, 8, 64) it keeps that many streaming chat requests in
flight until `--requests-per-level` have finished, and reports requests/s, output tokens/s,
time to first token (TTFT) and inter-token latency (ITL) p50/p99. Output tokens are counted
from the server's `usage` (stream_options.include_usage); TTFT is measured to the first chunk
carrying text (reasoning or content); ITL is the gap between consecutive text chunks.
By default it uses /v1/completions (raw text: every token is streamed as it is generated).

    bench/serve_bench.py                       # starts the demo model itself on a free port
    bench/serve_bench.py --url http://127.0.0.1:8000 --model NAME
"""
import argparse
import json
import os
import pathlib
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time

import requests

REPO = pathlib.Path(__file__).resolve().parents[1]


def pct(xs, p):
    if not xs:
        return float("nan")
    xs = sorted(xs)
    k = (len(xs) - 1) * p / 100.0
    lo, hi = int(k), min(int(k) + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (k - lo)


def one(url, model, max_tokens, i, out, headers, endpoint):
    body = {"model": model, "stream": True, "max_tokens": max_tokens, "temperature": 0,
            "stream_options": {"include_usage": True}, "ignore_eos": True}  # fixed length
    if endpoint == "chat":
        body["messages"] = [{"role": "user", "content": f"Benchmark request number {i}."}]
    else:
        body["prompt"] = f"Benchmark request number {i}. Once upon a time"
    t0 = time.perf_counter()
    first, last, itl, tokens = None, None, [], 0
    with requests.post(f"{url}/v1/{'chat/' if endpoint == 'chat' else ''}completions", json=body,
                       stream=True, timeout=600, headers=headers) as r:
        r.raise_for_status()
        for line in r.iter_lines():
            if not line or line == b"data: [DONE]":
                continue
            j = json.loads(line[6:])
            if j.get("usage"):
                tokens = j["usage"]["completion_tokens"]
            if endpoint == "chat":
                has_text = any((c["delta"].get("content") or c["delta"].get("reasoning_content")
                                or c["delta"].get("tool_calls")) for c in j.get("choices", []))
            else:
                has_text = any(c.get("text") for c in j.get("choices", []))
            if has_text:
                now = time.perf_counter()
                if first is None:
                    first = now - t0
                else:
                    itl.append(now - last)
                last = now
    out.append((first, itl, tokens, time.perf_counter() - t0))


def level(url, model, conc, n, max_tokens, headers, endpoint):
    results, lock, threads = [], threading.Lock(), []
    sem = threading.Semaphore(conc)

    def worker(i):
        try:
            local = []
            one(url, model, max_tokens, i, local, headers, endpoint)
            with lock:
                results.extend(local)
        finally:
            sem.release()

    t0 = time.perf_counter()
    for i in range(n):
        sem.acquire()
        t = threading.Thread(target=worker, args=(i,))
        t.start()
        threads.append(t)
    for t in threads:
        t.join()
    dt = time.perf_counter() - t0
    ttft = [r[0] for r in results if r[0] is not None]
    itl = [x for r in results for x in r[1]]
    toks = sum(r[2] for r in results)
    return {"conc": conc, "n": len(results), "req_s": len(results) / dt, "tok_s": toks / dt,
            "ttft50": pct(ttft, 50) * 1e3, "ttft99": pct(ttft, 99) * 1e3,
            "itl50": pct(itl, 50) * 1e3, "itl99": pct(itl, 99) * 1e3}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--url", help="an already running server (else one is started)")
    ap.add_argument("--model", help="model id (default: the first of /v1/models)")
    ap.add_argument("--api-key")
    ap.add_argument("--bin", default=os.environ.get("GOSSAMER_BIN", str(REPO / "build" / "gossamer")))
    ap.add_argument("--tokenizer", default=str(REPO.parent / "shared/tokenizer/tokenizer.json"))
    ap.add_argument("--serve-args", default="", help="extra arguments for gossamer serve")
    ap.add_argument("--concurrency", default="1,8,64")
    ap.add_argument("--endpoint", choices=["completions", "chat"], default="completions",
                    help="completions: every token is streamed as text (the chat parser holds "
                         "back a random model's output as an unfinished harmony header)")
    ap.add_argument("--requests-per-level", type=int, default=64,
                    help="requests per level (at least the concurrency)")
    ap.add_argument("--max-tokens", type=int, default=64)
    args = ap.parse_args(argv)
    headers = {"Authorization": f"Bearer {args.api_key}"} if args.api_key else {}
    proc, tmp = None, None
    url = args.url
    if not url:
        tmp = tempfile.TemporaryDirectory()
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        url = f"http://127.0.0.1:{port}"
        env = dict(os.environ)
        env.setdefault("GOSSAMER_CACHE", tmp.name)
        proc = subprocess.Popen([args.bin, "serve", "--port", str(port), "--tokenizer",
                                 args.tokenizer, *args.serve_args.split()],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
        for _ in range(600):
            try:
                if requests.get(url + "/health", timeout=1).status_code == 200:
                    break
            except requests.RequestException:
                time.sleep(0.2)
    try:
        model = args.model or requests.get(url + "/v1/models", headers=headers).json()["data"][0]["id"]
        level(url, model, 1, 2, 8, headers, args.endpoint)  # warm-up
        print(f"model {model}, /v1/{args.endpoint}, max({args.requests_per_level}, concurrency) "
              f"requests per level, max_tokens {args.max_tokens} (ignore_eos), greedy\n")
        print("| concurrency | requests/s | output tok/s | TTFT p50 (ms) | TTFT p99 (ms) "
              "| ITL p50 (ms) | ITL p99 (ms) |")
        print("|---:|---:|---:|---:|---:|---:|---:|")
        for c in [int(x) for x in args.concurrency.split(",")]:
            r = level(url, model, c, max(args.requests_per_level, c), args.max_tokens, headers,
                      args.endpoint)
            print(f"| {c} | {r['req_s']:.2f} | {r['tok_s']:.1f} | {r['ttft50']:.1f} | "
                  f"{r['ttft99']:.1f} | {r['itl50']:.1f} | {r['itl99']:.1f} |", flush=True)
    finally:
        if proc:
            proc.terminate()
            proc.wait(timeout=30)
        if tmp:
            tmp.cleanup()
    return 0


if __name__ == "__main__":
    sys.exit(main())
