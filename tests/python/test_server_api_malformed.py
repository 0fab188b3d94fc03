"""Malformed requests to the server (demo model): a 400 (405, 404) whose `param` names the field,
never a 500 or a hang; max_tokens near INT64_MAX, legacy completions fields, `stream_options`
without `stream`, a bad Content-Length answered at once.
"""
import json
import random
import socket
import time

import openai
import pytest
import requests

from server_api_util import MSGS, api_server_fixtures, metrics
from server_util import MODEL

server, client = api_server_fixtures()


# ------------------------------------------------------------------------------------------------
# malformed requests: a 400 (405, 404) naming the field, never a 500 or a hang
# ------------------------------------------------------------------------------------------------
def expect_error(server, path, body, status, param, method="POST"):
    r = requests.request(method, server.base + path, json=body, timeout=30)
    assert r.status_code == status, (path, body, r.status_code, r.text)
    err = r.json()["error"]
    assert set(err) >= {"message", "type", "param", "code"}, err
    assert err["param"] == param, (body, err)
    return err


def test_nul_byte_after_the_json_is_a_400(server):
    """nlohmann's parser ends its input at a NUL byte: '{...}\\0garbage' was taken as '{...}'."""
    body = json.dumps({"model": MODEL, "prompt": "Hi", "max_tokens": 1}).encode()
    r = requests.post(server.base + "/v1/completions", data=body + b"\0{{{", timeout=30,
                      headers={"Content-Type": "application/json"})
    assert r.status_code == 400 and "NUL byte" in r.json()["error"]["message"], r.text
    assert f"offset {len(body)}" in r.json()["error"]["message"]


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
    assert r.status_code == 404 and r.json()["error"]["type"] == "invalid_request_error"
    assert "/v1/no/such/route" in r.json()["error"]["message"]
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
    # Chat-only constraints would have been silently ignored (unconstrained output).
    for k, v in [("response_format", {"type": "json_object"}),
                 ("tools", [{"type": "function", "function": {"name": "f"}}]),
                 ("tool_choice", "required"), ("guided_json", {"type": "object"})]:
        err = expect_error(server, P, dict(base, **{k: v}), 400, k)
        assert "/v1/chat/completions" in err["message"]
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
# stream_options needs stream (and its usage chunks); a bad or missing Content-Length
# ------------------------------------------------------------------------------------------------
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
        assert r.status_code == 200
        # As OpenAI: every chunk has "usage", null but in the last one (choices: []).
        chunks = [json.loads(ln[6:]) for ln in r.content.decode().split("\n")
                  if ln.startswith("data: {")]
        assert len(chunks) >= 2 and all("usage" in c for c in chunks), chunks
        assert all(c["usage"] is None for c in chunks[:-1])
        assert chunks[-1]["choices"] == [] and chunks[-1]["usage"]["completion_tokens"] >= 1


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
    # No length and no chunked body: 411 at once (httplib would read until its read timeout).
    s = socket.create_connection(("127.0.0.1", server.port))
    s.settimeout(5)
    t0 = time.time()
    s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n\r\n")
    status, body = raw_response(s)
    s.close()
    assert time.time() - t0 < 2
    assert status.startswith("HTTP/1.1 411"), status
    assert json.loads(body)["error"]["code"] == "length_required"
    # A well-formed length above --max-body-bytes (8 MiB here) is a 413 before any body byte.
    s = socket.create_connection(("127.0.0.1", server.port))
    s.settimeout(5)
    t0 = time.time()
    s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
              b"Content-Length: 1000000000000\r\n\r\n")
    status, body = raw_response(s)
    s.close()
    assert time.time() - t0 < 2
    assert status.startswith("HTTP/1.1 413") and "Connection: close" in status, status
    err = json.loads(body)["error"]
    assert "1000000000000" in err["message"] and str(8 << 20) in err["message"], err
    # A valid one on the same kind of raw request still works.
    s = socket.create_connection(("127.0.0.1", server.port))
    s.settimeout(30)
    s.sendall(f"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
              f"Content-Length: {len(payload)}\r\n\r\n".encode() + payload)
    status, body = raw_response(s)
    s.close()
    assert status.startswith("HTTP/1.1 200") and json.loads(body)["object"] == "text_completion"



def test_chunked_and_compressed_bodies_are_limited_after_decoding(server):
    """httplib 0.11 checks --max-body-bytes (8 MiB here) only against a Content-Length: a chunked
    body, or a 9 KB gzip body that inflates to 9 MiB, used to be read whole (a 1 GB inflation
    got the server OOM-killed)."""
    import gzip
    big = json.dumps({"model": MODEL, "prompt": " " * (9 << 20), "max_tokens": 1}).encode()

    def chunks():
        for i in range(0, len(big), 1 << 16):
            yield big[i:i + (1 << 16)]
    r = requests.post(server.base + "/v1/completions", data=chunks(), timeout=60,
                      headers={"Content-Type": "application/json"})
    assert r.status_code == 413 and r.json()["error"]["code"] == "request_too_large", r.text
    packed = gzip.compress(big)
    assert len(packed) < 100_000
    r = requests.post(server.base + "/v1/completions", data=packed, timeout=60,
                      headers={"Content-Type": "application/json", "Content-Encoding": "gzip"})
    assert r.status_code == 413, r.text
    assert "after a chunked or compressed body is decoded" in r.json()["error"]["message"]
    # Small ones still work, both ways.
    small = json.dumps({"model": MODEL, "prompt": "Hi", "max_tokens": 1}).encode()
    r = requests.post(server.base + "/v1/completions", data=gzip.compress(small), timeout=60,
                      headers={"Content-Type": "application/json", "Content-Encoding": "gzip"})
    assert r.status_code == 200, r.text
    r = requests.post(server.base + "/v1/completions", data=iter([small[:5], small[5:]]),
                      timeout=60, headers={"Content-Type": "application/json"})
    assert r.status_code == 200, r.text
    assert requests.get(server.base + "/health", timeout=10).status_code == 200

# ------------------------------------------------------------------------------------------------
# CORS: --allowed-origin
# ------------------------------------------------------------------------------------------------
def test_cors_preflight_and_headers(server):
    from server_api_util import ORIGIN
    pre = {"Origin": ORIGIN, "Access-Control-Request-Method": "POST",
           "Access-Control-Request-Headers": "authorization, content-type, x-stainless-os"}
    r = requests.options(server.base + "/v1/chat/completions", headers=pre, timeout=10)
    assert r.status_code == 204, r.text
    assert r.headers["Access-Control-Allow-Origin"] == ORIGIN
    assert "POST" in r.headers["Access-Control-Allow-Methods"]
    assert r.headers["Access-Control-Allow-Headers"] == pre["Access-Control-Request-Headers"]
    # Another origin: answered, but without the headers that would let its page read anything.
    r = requests.options(server.base + "/v1/chat/completions",
                         headers=dict(pre, Origin="http://evil.example"), timeout=10)
    assert r.status_code == 204 and "Access-Control-Allow-Origin" not in r.headers
    r = requests.options(server.base + "/v1/nothing", headers=pre, timeout=10)
    assert r.status_code == 404
    # Actual requests (success and error alike) carry the header for the allowed origin only.
    ok = requests.get(server.base + "/health", headers={"Origin": ORIGIN}, timeout=10)
    assert ok.headers["Access-Control-Allow-Origin"] == ORIGIN and ok.headers["Vary"] == "Origin"
    bad = requests.post(server.base + "/v1/completions", headers={"Origin": ORIGIN}, json=[],
                        timeout=10)
    assert bad.status_code == 400 and bad.headers["Access-Control-Allow-Origin"] == ORIGIN
    other = requests.get(server.base + "/health", headers={"Origin": "http://evil.example"},
                         timeout=10)
    assert "Access-Control-Allow-Origin" not in other.headers
