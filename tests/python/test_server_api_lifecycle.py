"""The server's request lifetimes (demo model): a client that disconnects from a non-streaming
request cancels it, the per-request timeout on every endpoint, a graceful stop on SIGTERM, stop
strings counted as stops in /metrics, stop ids from generation_config.json; the demo model itself
and `gossamer run` on it.
"""
import json
import os
import random
import signal
import socket
import subprocess
import threading
import time

import openai
import pytest
import requests

from conftest import fresh_seed, gossamer_bin

from server_api_util import MSGS, api_server_fixtures, metrics
from server_util import MODEL, Server

server, client = api_server_fixtures()


# ------------------------------------------------------------------------------------------------
# a client that disconnects from a NON-streaming request cancels it
# ------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("path,body", [
    ("/v1/chat/completions", {"messages": MSGS, "max_tokens": 1500}),
    ("/v1/completions", {"prompt": "Once upon a time", "max_tokens": 1500}),
    ("/v1/responses", {"input": "Tell a long story", "max_output_tokens": 1500}),
])


def test_nonstreaming_disconnect_cancels(server, path, body):
    before = metrics(server).get("gossamer_request_success_total:cancelled", 0)
    payload = json.dumps(dict(body, model=MODEL)).encode()
    s = socket.create_connection(("127.0.0.1", server.port))
    s.sendall(f"POST {path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
              f"Content-Length: {len(payload)}\r\n\r\n".encode() + payload)
    deadline = time.time() + 30
    while time.time() < deadline and metrics(server)["gossamer_num_requests_running"] < 1:
        time.sleep(0.05)
    assert metrics(server)["gossamer_num_requests_running"] == 1
    t0 = time.time()
    s.close()  # 1500 tokens would take far longer than the deadline below
    while time.time() < t0 + 10:
        m = metrics(server)
        if m["gossamer_num_requests_running"] == 0 and m["gossamer_kv_cache_usage_perc"] == 0:
            break
        time.sleep(0.05)
    assert m["gossamer_num_requests_running"] == 0 and m["gossamer_kv_cache_usage_perc"] == 0
    assert m["gossamer_request_success_total:cancelled"] == before + 1
    print(f"{path}: cancelled {time.time() - t0:.2f} s after the client closed")


# ------------------------------------------------------------------------------------------------
# per-request timeout
# ------------------------------------------------------------------------------------------------
def sse_lines(server, path, body):
    r = requests.post(server.base + path, json=dict(body, model=MODEL, stream=True), timeout=60)
    return [ln for ln in r.text.split("\n") if ln.startswith("data: ")]


# The random demo model samples a stop token now and then; a request meant to outlive the 1 s
# timeout must not end early because of one (this made the test flaky before ignore_eos).
NOEOS = {"ignore_eos": True}


def test_request_timeout(cache, tokenizer_json):
    s = Server(cache, tokenizer_json, "--request-timeout", "1", "--max-model-len", "4096")
    try:
        c = openai.OpenAI(base_url=s.base + "/v1", api_key="x", max_retries=2)
        t0 = time.time()
        with pytest.raises(openai.APIStatusError) as e:
            c.chat.completions.create(model=MODEL, messages=MSGS, max_tokens=3000,
                                      extra_body=NOEOS)
        assert e.value.status_code == 504 and e.value.body["code"] == "timeout"
        assert e.value.response.headers["x-should-retry"] == "false"
        assert time.time() - t0 < 10  # not retried
        m = metrics(s)
        assert m["gossamer_request_success_total:timeout"] == 1
        with pytest.raises(openai.APIStatusError) as e:
            c.completions.create(model=MODEL, prompt="Hi", max_tokens=3000, extra_body=NOEOS)
        assert e.value.status_code == 504
        with pytest.raises(openai.APIStatusError) as e:
            c.responses.create(model=MODEL, input="Hi", max_output_tokens=3000, extra_body=NOEOS)
        assert e.value.status_code == 504
        # Streaming: an error event with code "timeout" (no finish_reason), then [DONE].
        for path, body in [("/v1/chat/completions", {"messages": MSGS, "max_tokens": 3000}),
                           ("/v1/completions", {"prompt": "Hi", "max_tokens": 3000})]:
            body.update(NOEOS)
            lines = sse_lines(s, path, body)
            assert lines[-1] == "data: [DONE]"
            err = json.loads(lines[-2][6:])
            assert err["error"]["code"] == "timeout", lines[-3:]
            finishes = [c.get("finish_reason") for ln in lines[:-2]
                        for c in json.loads(ln[6:]).get("choices", [])]
            assert not any(finishes)
        with pytest.raises(openai.APIError):  # the SDK raises on the error event
            for _ in c.chat.completions.create(model=MODEL, messages=MSGS, max_tokens=3000,
                                               stream=True, extra_body=NOEOS):
                pass
        events = list(c.responses.create(model=MODEL, input="Hi", max_output_tokens=3000,
                                         stream=True, extra_body=NOEOS))
        assert events[-2].type == "error" and events[-2].code == "timeout"
        assert events[-1].type == "response.failed"
        assert events[-1].response.status == "failed"
    finally:
        assert s.stop() == 0


# ------------------------------------------------------------------------------------------------
# SIGTERM: in-flight requests get --shutdown-grace, new ones 503, the rest end with an error
# ------------------------------------------------------------------------------------------------
def open_stream(s, path, body):
    """Starts a streaming request and returns (thread, lines): the thread reads every SSE line."""
    r = requests.post(s.base + path, json=dict(body, model=MODEL, stream=True), stream=True,
                      timeout=60)
    assert r.status_code == 200, r.text
    lines = []
    it = (ln.decode() for ln in r.iter_lines() if ln)  # bytes: str.splitlines splits at U+0085
    lines.append(next(it))  # the first event: the request is in flight

    def read():
        lines.extend(it)
    t = threading.Thread(target=read)
    t.start()
    return t, lines


def test_sigterm_drains_streams_then_cancels(cache, tokenizer_json):
    s = Server(cache, tokenizer_json, "--shutdown-grace", "2", "--max-model-len", "8192")
    try:
        short_t, short = open_stream(s, "/v1/completions",
                                     {"prompt": "Hi", "max_tokens": 4, **NOEOS})
        long_t, long = open_stream(s, "/v1/chat/completions",
                                   {"messages": MSGS, "max_tokens": 8000, **NOEOS})
        t0 = time.time()
        s.proc.send_signal(signal.SIGTERM)
        time.sleep(0.3)
        # Draining: the listener is open, /health says so, new generations are refused.
        assert requests.get(s.base + "/health", timeout=10).status_code == 503
        r = requests.post(s.base + "/v1/completions",
                          json={"model": MODEL, "prompt": "Hi", "max_tokens": 1}, timeout=10)
        assert r.status_code == 503 and r.json()["error"]["code"] == "server_shutting_down", r.text
        short_t.join(30)
        long_t.join(30)
        # The short stream finished normally within the grace period.
        assert short[-1] == "data: [DONE]", short[-3:]
        assert json.loads(short[-2][6:])["choices"][0]["finish_reason"] == "length", short[-3:]
        # The long one was cancelled when the grace ended: an error event (no finish_reason), then
        # [DONE].
        assert long[-1] == "data: [DONE]", long[-3:]
        events = [json.loads(ln[6:]) for ln in long[:-1]]
        assert [e["error"]["code"] for e in events if "error" in e] == ["server_shutting_down"]
        assert "error" in events[-1]
        assert not any(c.get("finish_reason") for e in events for c in e.get("choices", []))
        assert s.proc.wait(timeout=30) == 0, s.stderr()
        assert 1.5 < time.time() - t0 < 15
    finally:
        if s.proc.poll() is None:
            s.proc.kill()


# ------------------------------------------------------------------------------------------------
# the demo model; stop ids from generation_config.json
# ------------------------------------------------------------------------------------------------
def test_demo_model_config_and_run(server, cache, tokenizer_json):
    cfg = json.loads((cache / "demo" / "config.json").read_text())
    assert cfg["head_dim"] == 64  # what the CUDA kernels need
    assert "NOISE" in server.stderr() and "CUDA" in server.stderr()
    env = dict(os.environ, GOSSAMER_CACHE=str(cache))
    p = subprocess.run([gossamer_bin(), "run", "--tokenizer", str(tokenizer_json), "--prompt",
                        "Hello", "-n", "5", "--temperature", "0", "--ids", "--ignore-eos"],
                       capture_output=True, env=env, timeout=300)
    assert p.returncode == 0, p.stderr.decode()
    assert "NOISE" in p.stderr.decode()
    assert len(p.stdout.split()) == 5


def test_run_cli_seeded_sampling_matches_server(server, cache, tokenizer_json):
    # `gossamer run` and the server must draw the same tokens for the same seeded request: both
    # mask the padding logits rows past the tokenizer's ids (the CLI once sampled all 201088
    # rows, so every seeded draw differed from the server's).
    from tokenizers import Tokenizer
    tok = Tokenizer.from_file(str(tokenizer_json))
    test_seed = fresh_seed("test_run_cli_seeded_sampling_matches_server")
    rng = random.Random(test_seed)
    ids = [rng.randrange(1000, 199000) for _ in range(rng.randint(1, 12))]
    seed = rng.randrange(2**31)
    env = dict(os.environ, GOSSAMER_CACHE=str(cache))
    p = subprocess.run([gossamer_bin(), "run", "--tokenizer", str(tokenizer_json), "--tokens",
                        ",".join(map(str, ids)), "-n", "6", "--temperature", "1", "--seed",
                        str(seed), "--ids", "--ignore-eos"], capture_output=True, env=env,
                       timeout=300)
    assert p.returncode == 0, p.stderr.decode()
    cli = [int(t) for t in p.stdout.split()]
    r = requests.post(server.base + "/v1/completions", json={
        "model": MODEL, "prompt": ids, "max_tokens": 6, "temperature": 1, "seed": seed,
        "ignore_eos": True}).json()
    assert all(t < tok.get_vocab_size() for t in cli), (test_seed, cli)
    assert r["choices"][0]["text"] == tok.decode(cli, skip_special_tokens=False), (test_seed, cli)


def test_stop_string_counts_as_stop_in_metrics(server):
    # A stop string ends the request from the handler's side; /metrics once counted it as a
    # cancellation (finished_reason="cancelled").
    body = {"model": MODEL, "prompt": "Once upon a time", "temperature": 0}
    head = ""
    for n in range(3, 12):
        head = requests.post(server.base + "/v1/completions",
                             json=dict(body, max_tokens=n)).json()["choices"][0]["text"]
        if head:
            break
    before = metrics(server)
    r = requests.post(server.base + "/v1/completions",
                      json=dict(body, max_tokens=400, stop=[head])).json()
    assert r["choices"][0]["finish_reason"] == "stop", r
    for _ in range(50):  # the engine drops the request at its next step
        after = metrics(server)
        if after["gossamer_num_requests_running"] == 0:
            break
        time.sleep(0.05)
    finished = "gossamer_request_success_total:"
    assert after[finished + "stop"] - before[finished + "stop"] == 1
    assert after[finished + "cancelled"] == before[finished + "cancelled"]
    assert after[finished + "length"] == before[finished + "length"]


def test_generation_config_eos_stops(server, cache, tokenizer_json, tmp_path):
    from tokenizers import Tokenizer
    tok = Tokenizer.from_file(str(tokenizer_json))
    demo = cache / "demo"
    model = tmp_path / "model"
    model.mkdir()
    for f in demo.iterdir():
        if f.name != "generation_config.json":
            (model / f.name).symlink_to(f)
    prompt = tok.encode("The quick brown fox").ids
    # Greedy continuation from the CPU reference engine (`gossamer run`), independent of serve.
    p = subprocess.run([gossamer_bin(), "run", "--model", str(model), "--tokens",
                        ",".join(map(str, prompt)), "-n", "8", "--temperature", "0", "--ids",
                        "--ignore-eos"], capture_output=True, timeout=300)
    assert p.returncode == 0, p.stderr.decode()
    ids = [int(x) for x in p.stdout.split()]
    k = next(i for i in range(2, 8) if ids[i] not in ids[:i])
    (model / "generation_config.json").write_text(json.dumps({"eos_token_id": [200002,
                                                                               ids[k]]}))
    s = Server(cache, tokenizer_json, "--model", str(model), "--served-model-name", MODEL)
    try:
        c = openai.OpenAI(base_url=s.base + "/v1", api_key="x", max_retries=0)
        r = c.completions.create(model=MODEL, prompt=prompt, max_tokens=8, temperature=0)
        assert r.choices[0].finish_reason == "stop"
        assert r.usage.completion_tokens == k + 1  # the eos token counts, its text is not sent
        assert r.choices[0].text == tok.decode(ids[:k])
        # ignore_eos (vLLM extension): the same greedy run goes on through the eos id to max_tokens.
        r = c.completions.create(model=MODEL, prompt=prompt, max_tokens=8, temperature=0,
                                 extra_body={"ignore_eos": True})
        assert r.choices[0].finish_reason == "length"
        assert r.usage.completion_tokens == 8
        assert r.choices[0].text == tok.decode(ids[:8])
    finally:
        assert s.stop() == 0
    # A malformed generation_config.json is a clear startup error naming the file.
    (model / "generation_config.json").write_text('{"eos_token_id": "x"}')
    p = subprocess.run([gossamer_bin(), "serve", "--model", str(model), "--port", "0"],
                       capture_output=True, timeout=120)
    assert p.returncode == 1 and b"generation_config.json" in p.stderr

