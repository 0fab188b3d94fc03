#!/usr/bin/env python3
"""API paths that leave the plain decode loop, checked against a `gossamer serve` of any backend.

Structured output (rows sampled on the host under a token constraint, batched with rows sampled
on the device), logit_bias (the sampler's bias lists), and completions echo + prompt logprobs
(every logits row of the prompt). Standard library only, so that it runs on the GPU machine
(`scripts/gpu.sh run api`), which has no pip. The model is the built-in demo (random weights):
the checks are structural, plus one consistency oracle (a greedy continuation's logprobs against
the same tokens scored as a prompt). Exit status 1 when a check fails.
"""
import argparse
import concurrent.futures
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request

END = 200007  # <|end|> in o200k_harmony: +100 ends the random model's reasoning at once
# Closing tokens (" } ] , "} "] ",) made likelier, so that random strings, numbers and arrays end
# soon; the constraint alone decides which of them are allowed where.
SHORT = {"1": 8, "92": 8, "60": 8, "11": 4, "18583": 8, "2601": 8, "672": 8}
SCHEMA = {"type": "object",
          "properties": {"fruits": {"type": "array", "items": {"enum": ["apple", "pear", "kiwi"]},
                                    "minItems": 1, "maxItems": 3},
                         "count": {"type": "integer"}},
          "required": ["fruits", "count"], "additionalProperties": False}
failures = []


def check(ok, what):
    print(("ok    " if ok else "FAIL  ") + what, flush=True)
    if not ok:
        failures.append(what)


def post(base, path, body, timeout=600):
    req = urllib.request.Request(base + path, json.dumps(body).encode(),
                                 {"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def fits_schema(text):
    try:
        d = json.loads(text)
    except ValueError:
        return False
    return (isinstance(d, dict) and set(d) == {"fruits", "count"} and
            isinstance(d["count"], int) and isinstance(d["fruits"], list) and
            1 <= len(d["fruits"]) <= 3 and set(d["fruits"]) <= {"apple", "pear", "kiwi"})


def structured(base, model):
    fmt = {"type": "json_schema", "json_schema": {"name": "fruits", "schema": SCHEMA}}
    bodies = [{"model": model, "messages": [{"role": "user", "content": "JSON please."}],
               "max_tokens": 160, "temperature": 1, "seed": s, "n": 2,
               "logit_bias": {str(END): 100, **SHORT}, "response_format": fmt}
              for s in range(4)]
    plain = {"model": model, "prompt": "Hello", "max_tokens": 64, "temperature": 1}
    with concurrent.futures.ThreadPoolExecutor(8) as ex:  # constrained + plain rows in one step
        futs = [ex.submit(post, base, "/v1/chat/completions", b) for b in bodies]
        futs += [ex.submit(post, base, "/v1/completions", plain) for _ in range(4)]
        res = [f.result() for f in futs]
    done = valid = 0
    for status, r in res[:4]:
        check(status == 200, f"structured request: HTTP {status}")
        for c in r.get("choices", []):
            if c["finish_reason"] == "stop":
                done += 1
                valid += fits_schema(c["message"]["content"])
    check(done >= 5 and valid == done, f"structured output: {valid} of {done} finished "
          "documents fit the schema (8 choices)")
    check(all(s == 200 for s, _ in res[4:]), "plain requests beside them")


def logit_bias(base, model):
    _, tok = post(base, "/tokenize", {"prompt": " banana"})
    (banana,) = tok["tokens"]
    for t in (0, 1):
        _, r = post(base, "/v1/completions", {"model": model, "prompt": "The quick brown fox",
                                              "max_tokens": 6, "temperature": t, "logprobs": 0,
                                              "logit_bias": {str(banana): 100}})
        toks = r["choices"][0]["logprobs"]["tokens"]
        check(toks == [" banana"] * 6, f"logit_bias +100 at temperature {t}: {toks}")


def echo_scoring(base, model):
    _, tok = post(base, "/tokenize", {"prompt": "A short prompt to score, then continue"})
    ids = tok["tokens"]
    _, g = post(base, "/v1/completions", {"model": model, "prompt": ids, "max_tokens": 8,
                                          "temperature": 0, "logprobs": 1})
    lp = g["choices"][0]["logprobs"]
    _, t2 = post(base, "/tokenize", {"prompt": g["choices"][0]["text"]})
    gen = t2["tokens"]
    if len(gen) != 8:  # the text re-tokenises differently: score the ids the tokenizer gives
        check(True, "echo oracle skipped (generated text re-tokenises to other ids)")
        return
    status, s = post(base, "/v1/completions", {"model": model, "prompt": ids + gen,
                                               "max_tokens": 0, "echo": True, "logprobs": 1})
    check(status == 200, f"echo + max_tokens 0: HTTP {status} {s if status != 200 else ''}")
    if status != 200:
        return
    c = s["choices"][0]
    slp = c["logprobs"]
    check(len(slp["tokens"]) == len(ids) + 8 and slp["token_logprobs"][0] is None,
          "echo: one entry per prompt token, the first null")
    scored = slp["token_logprobs"][len(ids):]
    worst = max(abs(a - b) for a, b in zip(scored, lp["token_logprobs"]))
    # Decode (GEMV kernels) and prompt rows (GEMM kernels on the GPU) differ by bf16 rounding.
    check(worst < 0.05, f"echo: scored logprobs of the greedy tokens within {worst:.2e} of the "
          "generated ones")
    top1 = [next(iter(t)) for t in slp["top_logprobs"][len(ids):]]
    check(sum(a != b for a, b in zip(top1, lp["tokens"])) <= 1,
          f"echo: top-1 of the scored positions = the greedy tokens ({top1})")


def scoring_time(base, model):
    """Not a check: the wall time of scoring a long prompt (echo + max_tokens 0 + 5 logprobs)
    against a plain request for one token after the same prompt (one prefill)."""
    _, tok = post(base, "/tokenize", {"prompt": "The committee met on Tuesday to weigh the plan. "
                                                * 160})
    ids = tok["tokens"][:1500]
    t0 = time.perf_counter()
    status, s = post(base, "/v1/completions", {"model": model, "prompt": ids, "max_tokens": 0,
                                               "echo": True, "logprobs": 5})
    t1 = time.perf_counter()
    post(base, "/v1/completions", {"model": model, "prompt": ids[::-1], "max_tokens": 1})
    t2 = time.perf_counter()
    n = len(s["choices"][0]["logprobs"]["tokens"]) if status == 200 else 0
    check(status == 200 and n == len(ids), f"scoring {len(ids)} positions: HTTP {status}, {n} "
          "entries")
    print(f"info  scoring {len(ids)} positions (5 alternatives): {t1 - t0:.3f} s "
          f"({len(ids) / (t1 - t0):.0f} positions/s); one token after a {len(ids)}-token prompt "
          f"without scoring: {t2 - t1:.3f} s", flush=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--bin", required=True)
    ap.add_argument("--tokenizer", required=True)
    ap.add_argument("--serve-args", default="")
    a = ap.parse_args()
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    cache = tempfile.mkdtemp()
    log = open(os.path.join(cache, "serve.log"), "w+")
    proc = subprocess.Popen([a.bin, "serve", "--port", str(port), "--tokenizer", a.tokenizer,
                             *a.serve_args.split()], stdout=subprocess.DEVNULL, stderr=log,
                            env=dict(os.environ, GOSSAMER_CACHE=cache))
    base = f"http://127.0.0.1:{port}"
    try:
        for _ in range(600):
            try:
                if urllib.request.urlopen(base + "/health", timeout=1).status == 200:
                    break
            except OSError:
                time.sleep(0.2)
        model = json.loads(urllib.request.urlopen(base + "/v1/models").read())["data"][0]["id"]
        logit_bias(base, model)
        structured(base, model)
        echo_scoring(base, model)
        scoring_time(base, model)
    finally:
        proc.terminate()
        proc.wait(timeout=60)
    if failures:
        log.seek(0)
        sys.stderr.write(log.read()[-4000:])
    print(f"api smoke: {len(failures)} failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
