"""More end-to-end tests of `gossamer serve` (demo model, CPU backend) driven by the openai SDK:
tool_choice "required" with several tools (grammar-constrained name), non-streaming client
disconnects, batched /v1/completions, stored responses + previous_response_id, the per-request
timeout, stop ids from generation_config.json and the demo model itself.

The demo model has random weights, so the checks compare endpoints and modes with each other and
with independent oracles (the tokenizers library, the SDK's parsing), never with fixed text.
"""
import json
import os
import pathlib
import random
import socket
import subprocess
import time

import openai
import pytest
import requests

from conftest import gossamer_bin
from test_server import Server

MODEL = "gossamer-demo"
MSGS = [{"role": "user", "content": "What is the weather in Paris?"}]


def tool(name):
    return {"type": "function", "function": {
        "name": name, "description": f"The {name} tool",
        "parameters": {"type": "object", "properties": {"q": {"type": "string"}}}}}


NAMES = ["get_weather", "get_time", "lookup_user", "get"]
TOOLS = [tool(n) for n in NAMES]


@pytest.fixture(scope="module")
def cache(tmp_path_factory):
    return tmp_path_factory.mktemp("cache")


@pytest.fixture(scope="module")
def server(cache, tokenizer_json):
    s = Server(cache, tokenizer_json, "--default-max-tokens", "24", "--max-model-len", "2048",
               "--responses-store-max", "6")
    yield s
    assert s.stop() == 0, s.stderr()
    assert "step failed" not in s.stderr()


@pytest.fixture(scope="module")
def client(server):
    return openai.OpenAI(base_url=server.base + "/v1", api_key="x", max_retries=0)


def metrics(server):
    text = requests.get(server.base + "/metrics").text
    vals = {}
    for ln in text.splitlines():
        if ln and not ln.startswith("#") and "_bucket" not in ln:
            name = ln.split("{")[0].split()[0]
            if 'finished_reason="' in ln:
                name += ":" + ln.split('finished_reason="')[1].split('"')[0]
            vals[name] = float(ln.split()[-1])
    return vals


# ------------------------------------------------------------------------------------------------
# 1. tool_choice "required" with several tools
# ------------------------------------------------------------------------------------------------
def test_required_with_several_tools_always_calls_one_of_them(client):
    seen = set()
    for seed in range(10):
        r = client.chat.completions.create(model=MODEL, messages=MSGS, tools=TOOLS,
                                           tool_choice="required", max_tokens=14, n=3,
                                           temperature=1.0, seed=seed * 7919)
        for c in r.choices:
            calls = c.message.tool_calls
            assert calls, f"seed {seed}: no tool call: {c.message}"
            assert calls[0].function.name in NAMES, calls[0].function.name
            assert calls[0].id.startswith("call_")
            assert c.finish_reason in ("tool_calls", "length")
            seen.add(calls[0].function.name)
    print("names chosen:", sorted(seen))
    # Streaming: the call's first delta carries one of the names.
    chunks = list(client.chat.completions.create(
        model=MODEL, messages=MSGS, tools=TOOLS, tool_choice="required", max_tokens=14,
        stream=True, seed=5))
    calls = [tc for ch in chunks for c in ch.choices for tc in (c.delta.tool_calls or [])]
    assert calls and calls[0].function.name in NAMES
    # Responses API, same steering.
    r = client.responses.create(
        model=MODEL, input="Weather?", max_output_tokens=14, tool_choice="required",
        tools=[{"type": "function", "name": n, "parameters": TOOLS[0]["function"]["parameters"]}
               for n in NAMES])
    fc = [o for o in r.output if o.type == "function_call"]
    assert fc and fc[0].name in NAMES


# ------------------------------------------------------------------------------------------------
# 2. a client that disconnects from a NON-streaming request cancels it
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
# 3. /v1/completions with a batch of prompts
# ------------------------------------------------------------------------------------------------
def test_completions_batch(client, server, tokenizer_json):
    from tokenizers import Tokenizer
    tok = Tokenizer.from_file(str(tokenizer_json))
    prompts = ["The quick brown fox", "Hello there, how", "1, 2, 3,"]
    kw = dict(model=MODEL, max_tokens=6, temperature=0)
    singles = [client.completions.create(prompt=p, **kw) for p in prompts]
    r = client.completions.create(prompt=prompts, n=2, **kw)
    assert [c.index for c in r.choices] == list(range(6))
    for i, single in enumerate(singles):
        for j in range(2):
            assert r.choices[i * 2 + j].text == single.choices[0].text  # greedy: identical
    assert r.usage.prompt_tokens == sum(len(tok.encode(p).ids) for p in prompts)
    assert r.usage.completion_tokens == 2 * sum(s.usage.completion_tokens for s in singles)
    assert r.usage.total_tokens == r.usage.prompt_tokens + r.usage.completion_tokens
    # Arrays of token ids give the same.
    r_ids = client.completions.create(prompt=[tok.encode(p).ids for p in prompts], **kw)
    assert [c.text for c in r_ids.choices] == [s.choices[0].text for s in singles]
    # Streaming: chunks carry the global index; per-index text matches.
    texts, finish = {}, {}
    for ch in client.completions.create(prompt=prompts, stream=True, **kw):
        for c in ch.choices:
            texts[c.index] = texts.get(c.index, "") + c.text
            finish[c.index] = c.finish_reason or finish.get(c.index)
    assert texts == {i: s.choices[0].text for i, s in enumerate(singles)}
    assert all(finish[i] in ("stop", "length") for i in range(3))
    # Bad batches name the field.
    bad = requests.post(server.base + "/v1/completions",
                        json={"model": MODEL, "prompt": ["ok", 5], "max_tokens": 2})
    assert bad.status_code == 400 and "prompt[1]" in bad.json()["error"]["message"]
    big = requests.post(server.base + "/v1/completions",
                        json={"model": MODEL, "prompt": ["a"] * 100, "n": 3, "max_tokens": 1})
    assert big.status_code == 400


# ------------------------------------------------------------------------------------------------
# 4. /v1/responses: store, previous_response_id, GET / DELETE
# ------------------------------------------------------------------------------------------------
def test_responses_store_and_previous_response_id(client):
    kw = dict(model=MODEL, max_output_tokens=8, temperature=0)
    r1 = client.responses.create(input="My name is Ada.", **kw)
    got = client.responses.retrieve(r1.id)
    assert got.id == r1.id and got.output_text == r1.output_text and got.store is True
    r2 = client.responses.create(input="What is my name?", previous_response_id=r1.id, **kw)
    assert r2.previous_response_id == r1.id
    # Oracle: the same conversation sent explicitly (earlier input + earlier output + new input).
    explicit = [{"role": "user", "content": "My name is Ada."}]
    explicit += [o.model_dump(exclude_none=True) for o in r1.output]
    explicit += [{"role": "user", "content": "What is my name?"}]
    r2x = client.responses.create(input=explicit, **kw)
    assert r2.usage.input_tokens == r2x.usage.input_tokens > r1.usage.input_tokens
    assert r2.output_text == r2x.output_text
    # Chains go further back: r3 sees r1's and r2's turns.
    r3 = client.responses.create(input="And again?", previous_response_id=r2.id, **kw)
    assert r3.usage.input_tokens > r2.usage.input_tokens
    # store: false is not kept; unknown ids are 404 in OpenAI's error shape.
    r4 = client.responses.create(input="Forget me", store=False, **kw)
    assert r4.store is False
    with pytest.raises(openai.NotFoundError):
        client.responses.retrieve(r4.id)
    with pytest.raises(openai.NotFoundError) as e:
        client.responses.create(input="x", previous_response_id=r4.id, **kw)
    assert e.value.body["code"] == "previous_response_not_found"
    assert e.value.body["param"] == "previous_response_id"
    # Streaming responses are stored too.
    events = list(client.responses.create(input="Stream me", stream=True, **kw))
    final = events[-1].response
    assert client.responses.retrieve(final.id).output_text == final.output_text
    # DELETE
    client.responses.delete(r1.id)
    with pytest.raises(openai.NotFoundError):
        client.responses.retrieve(r1.id)


def test_responses_store_is_a_bounded_lru(client):
    kw = dict(model=MODEL, max_output_tokens=2, temperature=0)
    ids = [client.responses.create(input=f"n{i}", **kw).id for i in range(7)]  # limit is 6
    client.responses.retrieve(ids[1])  # refresh: ids[2] is now the least recently used
    newest = client.responses.create(input="one more", **kw).id
    with pytest.raises(openai.NotFoundError):
        client.responses.retrieve(ids[0])
    with pytest.raises(openai.NotFoundError):
        client.responses.retrieve(ids[2])
    for i in [ids[1], *ids[3:], newest]:
        assert client.responses.retrieve(i).id == i


# ------------------------------------------------------------------------------------------------
# 5. per-request timeout
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
# 6. the demo model; 7. stop ids from generation_config.json
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
    test_seed = int(os.environ.get("GOSSAMER_SEED", random.SystemRandom().randrange(2**63)))
    print(f"[seed] test_run_cli_seeded_sampling_matches_server: GOSSAMER_SEED={test_seed}")
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


# ------------------------------------------------------------------------------------------------
# 8. malformed requests: a 400 (405, 404) naming the field, never a 500 or a hang
# ------------------------------------------------------------------------------------------------
def expect_error(server, path, body, status, param, method="POST"):
    r = requests.request(method, server.base + path, json=body, timeout=30)
    assert r.status_code == status, (path, body, r.status_code, r.text)
    err = r.json()["error"]
    assert set(err) >= {"message", "type", "param", "code"}, err
    assert err["param"] == param, (body, err)
    return err


def test_wrong_json_types_are_400s_naming_the_field(server, tokenizer_json):
    rng = random.Random()
    seed = rng.randrange(1 << 30)
    print("seed", seed)
    rng.seed(seed)
    odd = rng.choice([5, 2.5, True, [1], {"a": 1}])  # anything but a string
    R, M = "/v1/responses", MODEL
    cases = [  # these were 500s (an unchecked JSON type read by the handler)
        (R, {"input": [{"type": odd, "role": "user", "content": "x"}]}, "input[0].type"),
        (R, {"input": "x", "text": {"format": {"type": odd}}}, "text.format.type"),
        (R, {"input": "x", "tools": [{"type": odd, "name": "f"}]}, "tools"),
        (R, {"input": "x", "reasoning": "high"}, "reasoning"),
        (R, {"input": []}, "input"),
        (R, {"input": [{"role": "wizard", "content": "x"}]}, "input[0].role"),
        ("/tokenize", {"prompt": "x", "add_special_tokens": "yes"}, "add_special_tokens"),
        ("/tokenize", {"prompt": "x", "allow_special": 1}, "allow_special"),
    ]
    for path, body, param in cases:
        expect_error(server, path, dict(body, model=M, max_output_tokens=2), 400, param)
    # Chat-request errors carry the JSON path of the field as `param`.
    C = "/v1/chat/completions"
    i = rng.randrange(1, 5)
    msgs = [{"role": "user", "content": "x"}] * i + [{"role": "wizard", "content": "x"}]
    expect_error(server, C, {"model": M, "messages": msgs}, 400, f"messages[{i}].role")
    img = [{"type": "text", "text": "a"}] * i + [{"type": "image_url", "image_url": {"url": "x"}}]
    err = expect_error(server, C, {"model": M, "messages": [{"role": "user", "content": img}]},
                       400, f"messages[0].content[{i}].type")
    assert "image_url" in err["message"]
    expect_error(server, C, {"model": M, "messages": []}, 400, "messages")
    expect_error(server, C, {"model": M, "messages": MSGS, "tool_choice": "required"}, 400,
                 "tool_choice")
    # Integers above INT64_MAX are out of range as given, not wrapped to negative values.
    big = (1 << 63) + rng.randrange(1 << 62)
    for field in ("n", "max_tokens", "top_logprobs", "seed"):
        err = expect_error(server, C, {"model": M, "messages": MSGS, field: big}, 400, field)
        assert str(big) in err["message"], err
    expect_error(server, C, {"model": M, "messages": MSGS, "stream": True,
                             "stream_options": {"include_usage": "yes"}}, 400,
                 "stream_options.include_usage")
    # Token ids the tokenizer does not know (the demo model's 201088 rows pad the vocabulary)
    # have no text: they were accepted, and echo returned an empty prompt.
    from tokenizers import Tokenizer
    vocab = Tokenizer.from_file(str(tokenizer_json)).get_vocab_size()
    bad_id = vocab + rng.randrange(max(1, 201088 - vocab))
    err = expect_error(server, "/v1/completions",
                       {"model": M, "prompt": [1, bad_id], "max_tokens": 1}, 400, "prompt")
    assert str(bad_id) in err["message"]


def test_max_tokens_near_int64_max_is_rejected_at_once(server):
    # prompt + max_tokens overflowed int64 in the scheduler's context check: the request was
    # admitted and generated until the request timeout.
    huge = (1 << 63) - 1 - random.randrange(64)
    for path, body, field in [
        ("/v1/chat/completions", {"messages": MSGS, "max_tokens": huge}, "max_tokens"),
        ("/v1/chat/completions", {"messages": MSGS, "max_completion_tokens": huge}, "max_tokens"),
        ("/v1/completions", {"prompt": "hi", "max_tokens": huge}, "max_tokens"),
        ("/v1/responses", {"input": "hi", "max_output_tokens": huge}, "max_output_tokens"),
    ]:
        t0 = time.time()
        err = expect_error(server, path, dict(body, model=MODEL), 400, field)
        assert "maximum context length" in err["message"] and time.time() - t0 < 10
    m = metrics(server)
    assert m["gossamer_num_requests_running"] == 0 and m["gossamer_num_requests_waiting"] == 0
    # Too long a prompt names the prompt, as each endpoint spells it.
    expect_error(server, "/v1/completions",
                 {"model": MODEL, "prompt": [1] * 2100, "max_tokens": 1}, 400, "prompt")
    long_text = " hi" * 2100
    expect_error(server, "/v1/chat/completions",
                 {"model": MODEL, "messages": [{"role": "user", "content": long_text}]}, 400,
                 "messages")
    expect_error(server, "/v1/responses", {"model": MODEL, "input": long_text}, 400, "input")


def test_methods_routes_and_model_retrieve(server, client):
    for method, path, allow in [("GET", "/v1/chat/completions", "POST"),
                                ("PUT", "/v1/completions", "POST"),
                                ("DELETE", "/v1/responses", "POST"),
                                ("POST", "/v1/models", "GET, HEAD"),
                                ("POST", "/health", "GET, HEAD")]:
        r = requests.request(method, server.base + path, data=b"{}", timeout=10)
        assert r.status_code == 405, (method, path, r.status_code, r.text)
        assert r.headers["Allow"] == allow
        assert r.json()["error"]["code"] == "method_not_allowed"
    r = requests.get(server.base + "/v1/no/such/route", timeout=10)
    assert r.status_code == 404 and r.json()["error"]["type"] == "not_found_error"
    m = client.models.retrieve(MODEL)
    assert m.id == MODEL and m.object == "model"
    with pytest.raises(openai.NotFoundError) as e:
        client.models.retrieve("no-such-model")
    assert e.value.body["code"] == "model_not_found"


def test_completions_suffix_best_of_and_incomplete_items(server, client):
    """Legacy fields with no equivalent are 400s, not silently ignored; a Responses output item
    cut off by the token budget is `incomplete`, as its response is."""
    n = random.randrange(1, 4)
    P = "/v1/completions"
    base = {"model": MODEL, "prompt": "Hi", "max_tokens": 2, "n": n}
    err = expect_error(server, P, dict(base, suffix=" the end"), 400, "suffix")
    assert "insert" in err["message"]
    expect_error(server, P, dict(base, suffix=3), 400, "suffix")
    expect_error(server, P, dict(base, best_of=n + 1), 400, "best_of")
    if n > 1:
        expect_error(server, P, dict(base, best_of=n - 1), 400, "best_of")
    r = client.completions.create(model=MODEL, prompt="Hi", max_tokens=2, n=n, best_of=n,
                                  suffix="")
    assert len(r.choices) == n
    # A forced call whose arguments need more than two tokens ({"q": "..."}): the call item is
    # cut off by the budget.
    schema = {"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"],
              "additionalProperties": False}
    r = client.responses.create(model=MODEL, input="Hi", max_output_tokens=2,
                                tool_choice="required",
                                tools=[{"type": "function", "name": "f", "parameters": schema}])
    assert r.status == "incomplete" and r.incomplete_details.reason == "max_output_tokens"
    calls = [o for o in r.output if o.type == "function_call"]
    assert len(calls) == 1 and calls[0].status == "incomplete", r.output


# ------------------------------------------------------------------------------------------------
# 9. chat logprobs cover the content; stream_options needs stream; a bad Content-Length
# ------------------------------------------------------------------------------------------------
def test_chat_logprobs_cover_the_content(client):
    """The random model mostly ends inside a message header, whose text the parser keeps as
    content when generation ends: those tokens had no logprobs (content non-empty, entries [])."""
    covered = 0
    for seed in range(4):
        kw = dict(model=MODEL, messages=MSGS, max_tokens=10, logprobs=True, top_logprobs=2, n=2,
                  seed=seed * 101)
        r = client.chat.completions.create(**kw)
        streamed = {}
        for ch in client.chat.completions.create(stream=True, **kw):
            for c in ch.choices:
                if c.logprobs and c.logprobs.content:
                    streamed.setdefault(c.index, []).extend(c.logprobs.content)
        for c in r.choices:
            entries = c.logprobs.content
            if c.message.content:
                assert entries, (seed, c.message.content)
                covered += 1
            raw = b"".join(bytes(e.bytes) for e in entries)
            try:
                text = raw.decode("utf-8")
            except UnicodeDecodeError:
                text = None  # the parser replaced the invalid bytes its own way
            if len(entries) == 10 and text is not None:  # every generated token is content
                assert text == c.message.content, seed
            # Streaming: the same entries, in order, spread over the chunks.
            s = streamed.get(c.index, [])
            assert [e.token for e in s] == [e.token for e in entries], seed
            assert all(abs(a.logprob - b.logprob) < 1e-5 for a, b in zip(s, entries))
    assert covered > 0


def test_stream_options_needs_stream(server):
    for path, body in [("/v1/chat/completions", {"messages": MSGS}),
                       ("/v1/completions", {"prompt": "Hi"})]:
        body = dict(body, model=MODEL, max_tokens=1)
        for stream in ({"stream": False}, {}):
            err = expect_error(server, path,
                               dict(body, stream_options={"include_usage": True}, **stream), 400,
                               "stream_options")
            assert "only allowed when 'stream' is enabled" in err["message"], err
        r = requests.post(server.base + path, json=dict(body, stream_options=None), timeout=60)
        assert r.status_code == 200, r.text  # null is no stream_options
        r = requests.post(server.base + path, timeout=60, stream=True,
                          json=dict(body, stream=True, stream_options={"include_usage": True}))
        assert r.status_code == 200 and '"usage"' in r.text


def raw_response(sock):
    """One HTTP response from a socket: (status line + headers, body)."""
    data = b""
    while b"\r\n\r\n" not in data:
        d = sock.recv(65536)
        if not d:
            break
        data += d
    head, _, body = data.partition(b"\r\n\r\n")
    n = int([ln.split(b":")[1] for ln in head.split(b"\r\n")
             if ln.lower().startswith(b"content-length:")][0])
    while len(body) < n:
        d = sock.recv(65536)
        if not d:
            break
        body += d
    return head.decode(), body


def test_bad_content_length_is_answered_at_once(server):
    """httplib reads Content-Length with strtoull: "-5" (2^64 - 5) had no reply until its read
    timeout, "abc" (0) left the body unread and blamed the JSON."""
    payload = json.dumps({"model": MODEL, "prompt": "Hi", "max_tokens": 1}).encode()
    for lengths in (["-5"], ["abc"], ["+5"], ["1e3"], ["99999999999999999999999"],
                    [str(len(payload)), str(len(payload) + 1)]):
        head = "".join(f"Content-Length: {v}\r\n" for v in lengths)
        s = socket.create_connection(("127.0.0.1", server.port))
        s.settimeout(5)
        t0 = time.time()
        s.sendall(f"POST /v1/completions HTTP/1.1\r\nHost: x\r\n"
                  f"Content-Type: application/json\r\n{head}\r\n".encode() + payload)
        status, body = raw_response(s)
        s.close()
        assert time.time() - t0 < 2, lengths
        assert status.startswith("HTTP/1.1 400"), (lengths, status)
        assert "Connection: close" in status, status
        err = json.loads(body)["error"]
        assert "Content-Length" in err["message"] and err["type"] == "invalid_request_error"
    # A valid one on the same kind of raw request still works.
    s = socket.create_connection(("127.0.0.1", server.port))
    s.settimeout(30)
    s.sendall(f"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
              f"Content-Length: {len(payload)}\r\n\r\n".encode() + payload)
    status, body = raw_response(s)
    s.close()
    assert status.startswith("HTTP/1.1 200") and json.loads(body)["object"] == "text_completion"
