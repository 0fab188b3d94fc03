#!/usr/bin/env python3
"""Bounded loopback load test of `gossamer serve`.

Starts a server (demo model by default) on a free 127.0.0.1 port, then runs `--clients`
concurrent chat clients (streaming; a `--blocking` fraction non-streaming), `--requests` requests
in total, a `--disconnect` fraction of which disconnect at a random point mid-stream (or, when
non-streaming, close the socket after a short read timeout while the server still generates).
Checks, then stops the server by itself:
  * every request either completes (SSE stream ending in `data: [DONE]` with a finish_reason),
    is cleanly rejected (429 with an OpenAI error body), or was disconnected by the client;
  * afterwards the server is idle: no running/waiting request and no KV block in use (/metrics);
  * the server's RSS returns near its post-warm-up baseline;
  * the server log has no error lines and it exits 0 on SIGTERM.

    tests/load/load_test.py                       # the big hand-run configuration
    tests/load/load_test.py --clients 64 --requests 128 --max-tokens 16   # CI size
"""
import argparse
import json
import os
import pathlib
import random
import socket
import subprocess
import sys
import tempfile
import threading
import time

import requests

REPO = pathlib.Path(__file__).resolve().parents[2]


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def rss_mb(pid):
    for line in open(f"/proc/{pid}/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024.0
    return 0.0


def metrics(base):
    out = {}
    for ln in requests.get(base + "/metrics", timeout=10).text.splitlines():
        if ln and not ln.startswith("#") and "_bucket" not in ln:
            key = ln.split("{")[0]
            if "finished_reason" in ln:
                key += ":" + ln.split('finished_reason="')[1].split('"')[0]
            out[key] = float(ln.split()[-1])
    return out


def blocking_request(base, body, disconnect, args):
    """A non-streaming request; a disconnecting client gives up (closes) after a short read
    timeout, which the server notices while the request is still generating."""
    body = dict(body, stream=False)
    timeout = (args.timeout, disconnect) if disconnect else args.timeout
    try:
        r = requests.post(base + "/v1/chat/completions", json=body, timeout=timeout)
    except requests.ReadTimeout:
        return "disconnected" if disconnect else "exception:ReadTimeout"
    if r.status_code == 429:
        return "rejected" if r.json()["error"]["type"] == "rate_limit_error" else "bad-429"
    if r.status_code != 200:
        return f"http-{r.status_code}"
    return "completed" if r.json()["choices"][0].get("finish_reason") else "truncated"


def one_request(base, model, i, args, rng, results, lock):
    body = {"model": model, "stream": True, "max_tokens": rng.randint(1, args.max_tokens),
            "temperature": rng.choice([0, 0.8]),
            "messages": [{"role": "system", "content": "Shared system prompt. " * 8},
                         {"role": "user", "content": f"request {i} " * rng.randint(1, 30)}]}
    disconnect_after = rng.randint(1, 8) if rng.random() < args.disconnect else None
    outcome = "?"
    try:
        if rng.random() < args.blocking:
            outcome = blocking_request(base, body, disconnect_after and rng.uniform(0.05, 0.5),
                                       args)
        else:
            outcome = streaming_request(base, body, disconnect_after, args)
    except requests.RequestException as ex:
        outcome = f"exception:{type(ex).__name__}"
    with lock:
        results[outcome] = results.get(outcome, 0) + 1


def streaming_request(base, body, disconnect_after, args):
    outcome = "?"
    with requests.post(base + "/v1/chat/completions", json=body, stream=True,
                       timeout=args.timeout) as r:
        if r.status_code == 429:
            e = r.json()["error"]
            return "rejected" if e["type"] == "rate_limit_error" else "bad-429"
        if r.status_code != 200:
            return f"http-{r.status_code}"
        events, finish, done = 0, None, False
        for line in r.iter_lines():
            if not line:
                continue
            events += 1
            if disconnect_after is not None and events >= disconnect_after:
                return "disconnected"
            data = line.decode()[len("data: "):]
            if data == "[DONE]":
                done = True
                break
            j = json.loads(data)
            if "error" in j:
                return "stream-error"
            for c in j["choices"]:
                finish = c.get("finish_reason") or finish
        if outcome == "?":
            outcome = "completed" if done and finish else "truncated"
    return outcome


def run_wave(base, model, args, n, seed):
    results, lock = {}, threading.Lock()
    rng_master = random.Random(seed)
    sem = threading.Semaphore(args.clients)
    threads = []

    def worker(i, rng):
        try:
            one_request(base, model, i, args, rng, results, lock)
        finally:
            sem.release()

    for i in range(n):
        sem.acquire()
        t = threading.Thread(target=worker, args=(i, random.Random(rng_master.random())))
        t.start()
        threads.append(t)
    for t in threads:
        t.join()
    return results


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--bin", default=os.environ.get("GOSSAMER_BIN", str(REPO / "build" / "gossamer")))
    ap.add_argument("--tokenizer", default=str(REPO.parent / "shared/tokenizer/tokenizer.json"))
    ap.add_argument("--clients", type=int, default=300)
    ap.add_argument("--requests", type=int, default=1000)
    ap.add_argument("--max-tokens", type=int, default=48)
    ap.add_argument("--disconnect", type=float, default=0.3)
    ap.add_argument("--blocking", type=float, default=0.25,
                    help="fraction of non-streaming requests (their disconnects are read "
                         "timeouts: the client closes the socket while the server generates)")
    ap.add_argument("--timeout", type=float, default=120)
    ap.add_argument("--time-limit", type=float, default=600, help="whole run, seconds")
    ap.add_argument("--rss-slack-mb", type=float, default=64)
    ap.add_argument("--seed", type=int, default=None)
    ap.add_argument("--serve-args", default="--max-num-seqs 64 --max-queue 1024",
                    help="extra arguments for gossamer serve")
    args = ap.parse_args(argv)
    seed = args.seed if args.seed is not None else random.SystemRandom().randrange(2**31)
    print(f"load test: seed {seed}, {args.clients} clients, {args.requests} requests", flush=True)
    t_start = time.time()
    with tempfile.TemporaryDirectory() as tmp:
        port = free_port()
        base = f"http://127.0.0.1:{port}"
        log = open(pathlib.Path(tmp) / "serve.log", "w+")
        env = dict(os.environ, GOSSAMER_CACHE=os.environ.get("GOSSAMER_CACHE", tmp))
        proc = subprocess.Popen([args.bin, "serve", "--port", str(port), "--tokenizer",
                                 args.tokenizer, *args.serve_args.split()],
                                stdout=subprocess.DEVNULL, stderr=log, env=env)
        failures = []
        try:
            deadline = time.time() + 120
            while True:
                try:
                    if requests.get(base + "/health", timeout=1).status_code == 200:
                        break
                except requests.RequestException:
                    pass
                if proc.poll() is not None or time.time() > deadline:
                    raise RuntimeError("server did not start")
                time.sleep(0.2)
            model = requests.get(base + "/v1/models").json()["data"][0]["id"]
            # Warm-up wave (allocations, thread pools), then the baseline RSS.
            run_wave(base, model, args, min(args.clients, 64), seed + 1)
            time.sleep(1)
            base_rss = rss_mb(proc.pid)
            t0 = time.time()
            res = run_wave(base, model, args, args.requests, seed)
            dt = time.time() - t0
            print(f"outcomes: {res} in {dt:.1f}s", flush=True)
            ok = {"completed", "rejected", "disconnected"}
            bad = {k: v for k, v in res.items() if k not in ok}
            if bad:
                failures.append(f"unexpected outcomes {bad}")
            if res.get("completed", 0) == 0:
                failures.append("no request completed")
            # Idle again: nothing running or waiting, every KV block released.
            idle_deadline = time.time() + 30
            while True:
                m = metrics(base)
                idle = (m["gossamer_num_requests_running"] == 0 and
                        m["gossamer_num_requests_waiting"] == 0 and
                        m["gossamer_kv_cache_usage_perc"] == 0)
                if idle or time.time() > idle_deadline:
                    break
                time.sleep(0.2)
            if not idle:
                failures.append(f"server not idle after the load: {m}")
            time.sleep(1)
            end_rss = rss_mb(proc.pid)
            print(f"RSS: baseline {base_rss:.1f} MB, after {end_rss:.1f} MB; cancelled "
                  f"{m.get('gossamer_request_success_total:cancelled', 0):.0f}", flush=True)
            if end_rss > base_rss + args.rss_slack_mb:
                failures.append(f"RSS grew from {base_rss:.1f} to {end_rss:.1f} MB")
            if time.time() - t_start > args.time_limit:
                failures.append(f"took {time.time() - t_start:.0f}s > {args.time_limit}s")
        finally:
            proc.terminate()
            try:
                rc = proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                rc = "killed after SIGTERM timeout"
            log.seek(0)
            text = log.read()
        if rc != 0:
            failures.append(f"server exit status {rc}")
        err_lines = [ln for ln in text.splitlines() if "error" in ln.lower() or "failed" in ln]
        if err_lines:
            failures.append("errors in the server log:\n" + "\n".join(err_lines[:20]))
    for f in failures:
        print("FAIL:", f, flush=True)
    print("load test:", "FAILED" if failures else "passed", f"({time.time() - t_start:.1f}s)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
