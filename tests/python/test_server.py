"""End-to-end tests of `gossamer serve` driven by the official openai SDK.

A server is started on a free loopback port with the built-in demo model (tiny, random weights,
synthesised into a temporary cache dir with the real tokenizer). Its text is noise, so the checks
are about API shapes, consistency between endpoints/modes, and error behaviour; independent
oracles are the SDK's own parsing, openai-harmony (prompt token counts) and the tokenizers
library (detokenisation).
"""
import concurrent.futures
import json
import os
import select
import signal
import socket
import subprocess
import time

import openai
import pytest
import requests

from conftest import gossamer_bin
from test_harmony import harmony  # noqa: F401  (offline openai-harmony fixture)

KEY = "test-key-123"


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    def __init__(self, cache, tokenizer, *extra):
        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        env = dict(os.environ, GOSSAMER_CACHE=str(cache))
        self.log = open(cache / f"serve-{self.port}.log", "w+")
        self.proc = subprocess.Popen(
            [gossamer_bin(), "serve", "--port", str(self.port), "--tokenizer", str(tokenizer),
             "--date", "2025-06-28", *map(str, extra)],
            stdout=subprocess.DEVNULL, stderr=self.log, env=env)
        deadline = time.time() + 120
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError("server exited:\n" + self.stderr())
            try:
                if requests.get(self.base + "/health", timeout=1).status_code == 200:
                    return
            except requests.RequestException:
                time.sleep(0.2)
        raise RuntimeError("server did not start:\n" + self.stderr())

    def stderr(self):
        self.log.flush()
        self.log.seek(0)
        return self.log.read()

    def stop(self):
        self.proc.terminate()
        try:
            rc = self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            raise
        return rc


@pytest.fixture(scope="module")
def cache(tmp_path_factory):
    """One demo-model cache dir for every server of this module (synthesised once)."""
    return tmp_path_factory.mktemp("cache")


@pytest.fixture(scope="module")
def server(cache, tokenizer_json):
    s = Server(cache, tokenizer_json, "--api-key", KEY, "--default-max-tokens", "24",
               "--max-body-bytes", "65536", "--max-model-len", "2048")
    yield s
    assert s.stop() == 0, s.stderr()
    err = s.stderr()
    assert "NOISE" in err  # the demo model says loudly that its text is noise
    assert "step failed" not in err and "ERROR" not in err.upper().replace("ERRORS", ""), err


@pytest.fixture(scope="module")
def client(server):
    return openai.OpenAI(base_url=server.base + "/v1", api_key=KEY, max_retries=0)


MODEL = "gossamer-demo"
MSGS = [{"role": "system", "content": "You are terse."},
        {"role": "user", "content": "Name three colours."}]


def test_models_list(client):
    models = client.models.list()
    assert [m.id for m in models.data] == [MODEL]
    assert models.data[0].object == "model"


def test_chat_plain_and_usage(client, harmony):
    r = client.chat.completions.create(model=MODEL, messages=MSGS, max_tokens=16, temperature=0)
    assert r.object == "chat.completion" and r.id.startswith("chatcmpl-")
    c = r.choices[0]
    assert c.message.role == "assistant"
    assert c.finish_reason in ("stop", "length", "tool_calls")
    u = r.usage
    assert 1 <= u.completion_tokens <= 16
    assert u.total_tokens == u.prompt_tokens + u.completion_tokens
    assert u.completion_tokens_details.reasoning_tokens <= u.completion_tokens
    # Independent oracle for the prompt length: openai-harmony's renderer.
    oh, enc = harmony
    Conversation, DeveloperContent, Message = oh.Conversation, oh.DeveloperContent, oh.Message
    ReasoningEffort, Role, SystemContent = oh.ReasoningEffort, oh.Role, oh.SystemContent
    sys_msg = (SystemContent.new().with_reasoning_effort(ReasoningEffort.MEDIUM)
               .with_conversation_start_date("2025-06-28"))
    conv = Conversation.from_messages([
        Message.from_role_and_content(Role.SYSTEM, sys_msg),
        Message.from_role_and_content(Role.DEVELOPER,
                                      DeveloperContent.new().with_instructions("You are terse.")),
        Message.from_role_and_content(Role.USER, "Name three colours.")])
    ids = enc.render_conversation_for_completion(conv, Role.ASSISTANT)
    assert u.prompt_tokens == len(ids)


def test_greedy_is_deterministic_and_prefix_cached(client):
    msgs = [{"role": "user", "content": "A long shared system prompt. " * 20}]
    a = client.chat.completions.create(model=MODEL, messages=msgs, max_tokens=12, temperature=0)
    b = client.chat.completions.create(model=MODEL, messages=msgs, max_tokens=12, temperature=0)
    assert a.choices[0].message.content == b.choices[0].message.content
    assert reasoning_of(a.choices[0].message) == reasoning_of(b.choices[0].message)
    cached = b.usage.prompt_tokens_details.cached_tokens
    assert cached > 0 and cached % 16 == 0 and cached < b.usage.prompt_tokens


def test_seed_reproduces_sampling(client):
    kw = dict(model=MODEL, messages=MSGS, max_tokens=12, temperature=1.0, top_p=0.9, seed=1234)
    a = client.chat.completions.create(**kw)
    b = client.chat.completions.create(**kw)
    assert a.choices[0].message == b.choices[0].message


def reasoning_of(msg):
    # Extra fields are kept by the SDK's models but only exist when the server sent them.
    return getattr(msg, "reasoning_content", None)


def collect_stream(client, **kw):
    chunks = list(client.chat.completions.create(stream=True, **kw))
    text = {"content": "", "reasoning": ""}
    finish = None
    for ch in chunks:
        for c in ch.choices:
            d = c.delta
            text["content"] += d.content or ""
            text["reasoning"] += getattr(d, "reasoning_content", None) or ""
            finish = c.finish_reason or finish
    return chunks, text, finish


def test_chat_streaming_matches_blocking(client):
    kw = dict(model=MODEL, messages=MSGS, max_tokens=20, temperature=0)
    full = client.chat.completions.create(**kw)
    chunks, text, finish = collect_stream(client, stream_options={"include_usage": True}, **kw)
    assert chunks[0].choices[0].delta.role == "assistant"
    assert all(ch.object == "chat.completion.chunk" for ch in chunks)
    assert len({ch.id for ch in chunks}) == 1
    assert text["content"] == (full.choices[0].message.content or "")
    assert text["reasoning"] == (reasoning_of(full.choices[0].message) or "")
    assert finish == full.choices[0].finish_reason
    last = chunks[-1]
    assert last.choices == [] and last.usage.completion_tokens == full.usage.completion_tokens


def test_reasoning_effort(server, client):
    for effort in ("low", "medium", "high"):
        r = client.chat.completions.create(model=MODEL, messages=MSGS, max_tokens=4,
                                           reasoning_effort=effort)
        assert r.choices[0].finish_reason in ("stop", "length", "tool_calls")
    t = requests.post(server.base + "/apply-template", headers={"Authorization": f"Bearer {KEY}"},
                      json={"model": MODEL, "messages": MSGS, "reasoning_effort": "high"}).json()
    assert "Reasoning: high" in t["prompt"]
    with pytest.raises(openai.BadRequestError):
        client.chat.completions.create(model=MODEL, messages=MSGS, reasoning_effort="extreme")


TOOLS = [{"type": "function", "function": {
    "name": "get_weather", "description": "Weather for a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                   "required": ["city"]}}}]


def test_named_tool_choice_forces_a_call(client):
    r = client.chat.completions.create(
        model=MODEL, messages=MSGS, tools=TOOLS, max_tokens=10,
        tool_choice={"type": "function", "function": {"name": "get_weather"}})
    msg = r.choices[0].message
    assert msg.tool_calls and msg.tool_calls[0].function.name == "get_weather"
    assert msg.tool_calls[0].id.startswith("call_") and msg.tool_calls[0].type == "function"
    assert r.choices[0].finish_reason in ("tool_calls", "length")
    # Streaming: the call starts with its id and name, arguments arrive as deltas, same id.
    chunks = list(client.chat.completions.create(
        model=MODEL, messages=MSGS, tools=TOOLS, max_tokens=10, stream=True,
        tool_choice={"type": "function", "function": {"name": "get_weather"}}))
    calls = [tc for ch in chunks for c in ch.choices for tc in (c.delta.tool_calls or [])]
    assert calls[0].id.startswith("call_") and calls[0].function.name == "get_weather"
    assert all(tc.index == 0 and tc.id in (None, calls[0].id) for tc in calls)


def test_tool_choice_none_and_auto_accepted(client):
    for choice in ("none", "auto", "required"):
        # With a single tool, "required" is steered exactly like naming that tool.
        r = client.chat.completions.create(model=MODEL, messages=MSGS, tools=TOOLS,
                                           tool_choice=choice, max_tokens=6)
        if choice == "required":
            assert r.choices[0].message.tool_calls[0].function.name == "get_weather"
        if choice == "none":
            assert not r.choices[0].message.tool_calls


def test_logprobs_and_n(client):
    r = client.chat.completions.create(model=MODEL, messages=MSGS, max_tokens=8, temperature=0,
                                       logprobs=True, top_logprobs=3, n=2)
    assert len(r.choices) == 2
    assert r.choices[0].message.content == r.choices[1].message.content  # greedy
    lp = r.choices[0].logprobs
    if lp and lp.content:
        for t in lp.content:
            assert len(t.top_logprobs) == 3
            assert t.logprob <= 0
            # greedy: the chosen token is the most likely one
            assert abs(t.logprob - t.top_logprobs[0].logprob) < 1e-4


def test_completions_text_ids_stream_and_stop(client, tokenizer_json):
    from tokenizers import Tokenizer
    tok = Tokenizer.from_file(str(tokenizer_json))
    r = client.completions.create(model=MODEL, prompt="The quick brown fox", max_tokens=12,
                                  temperature=0, logprobs=2)
    c = r.choices[0]
    assert r.object == "text_completion" and c.finish_reason in ("stop", "length")
    assert r.usage.prompt_tokens == len(tok.encode("The quick brown fox").ids)
    assert len(c.logprobs.tokens) == r.usage.completion_tokens
    ids = tok.encode("The quick brown fox").ids
    r2 = client.completions.create(model=MODEL, prompt=ids, max_tokens=12, temperature=0)
    assert r2.choices[0].text == c.text
    chunks = list(client.completions.create(model=MODEL, prompt="The quick brown fox",
                                            max_tokens=12, temperature=0, stream=True))
    assert "".join(ch.choices[0].text for ch in chunks if ch.choices) == c.text
    # A stop string cuts the text right before it.
    text = c.text
    if len(text) >= 4:
        stop = text[len(text) // 2:len(text) // 2 + 2]
        r3 = client.completions.create(model=MODEL, prompt="The quick brown fox", max_tokens=12,
                                       temperature=0, stop=[stop])
        assert r3.choices[0].text == text[:text.find(stop)]
        assert r3.choices[0].finish_reason == "stop"


def test_logit_bias(client, tokenizer_json):
    from tokenizers import Tokenizer
    tok = Tokenizer.from_file(str(tokenizer_json))
    (banana,) = tok.encode(" banana").ids
    base = client.completions.create(model=MODEL, prompt="The quick brown fox", max_tokens=6,
                                     temperature=0)
    # +100 outweighs the demo model's logits: every token is the biased one, greedy or sampled.
    for temperature in (0, 1):
        r = client.completions.create(model=MODEL, prompt="The quick brown fox", max_tokens=6,
                                      temperature=temperature, logprobs=1,
                                      logit_bias={str(banana): 100})
        assert r.choices[0].text == tok.decode([banana] * 6), r.choices[0].text
        assert r.choices[0].logprobs.tokens == [" banana"] * 6
    # A bias on ids the greedy text never uses leaves it unchanged; a ban changes it.
    unused = [i for i in range(1000, 1010) if tok.decode([i]) not in base.choices[0].text]
    r = client.completions.create(model=MODEL, prompt="The quick brown fox", max_tokens=6,
                                  temperature=0, logit_bias={str(i): -100 for i in unused})
    assert r.choices[0].text == base.choices[0].text
    first = client.completions.create(model=MODEL, prompt="The quick brown fox", max_tokens=1,
                                      temperature=0, logprobs=0)
    s0 = first.choices[0].logprobs.tokens[0]
    ids0 = tok.encode(s0).ids
    if len(ids0) == 1 and tok.decode(ids0) == s0:
        r = client.completions.create(model=MODEL, prompt="The quick brown fox", max_tokens=1,
                                      temperature=0, logprobs=0,
                                      logit_bias={str(ids0[0]): -100})
        assert r.choices[0].logprobs.tokens[0] != s0
    # Chat takes the same field; ids outside the vocabulary and bad values are 400s.
    chat = client.chat.completions.create(model=MODEL, messages=MSGS, max_tokens=3,
                                          temperature=0, logit_bias={str(banana): 100})
    assert chat.usage.completion_tokens == 3
    for bias in ({"300000": 1}, {"5": 101}, {"five": 1}):
        with pytest.raises(openai.BadRequestError) as e:
            client.completions.create(model=MODEL, prompt="x", max_tokens=2, logit_bias=bias)
        assert "logit_bias" in str(e.value)


def test_responses_api(client):
    r = client.responses.create(model=MODEL, input="Say hi", max_output_tokens=16,
                                instructions="Be brief.", temperature=0)
    assert r.object == "response" and r.status in ("completed", "incomplete")
    assert r.usage.output_tokens <= 16 and r.usage.input_tokens > 0
    kinds = {o.type for o in r.output}
    assert kinds <= {"reasoning", "message", "function_call"}
    events = list(client.responses.create(model=MODEL, input="Say hi", max_output_tokens=16,
                                          instructions="Be brief.", temperature=0, stream=True))
    assert events[0].type == "response.created"
    assert events[-1].type in ("response.completed", "response.incomplete")
    assert [e.sequence_number for e in events] == list(range(len(events)))
    assert events[-1].response.output_text == r.output_text
    fc = client.responses.create(
        model=MODEL, input="Weather in Paris?", max_output_tokens=10,
        tools=[{"type": "function", "name": "get_weather", "parameters": TOOLS[0]["function"]
                ["parameters"]}], tool_choice={"type": "function", "name": "get_weather"})
    calls = [o for o in fc.output if o.type == "function_call"]
    assert calls and calls[0].name == "get_weather" and calls[0].call_id.startswith("call_")


def raw(server, body, path="/v1/chat/completions", key=KEY, data=None, timeout=60):
    h = {"Content-Type": "application/json"}
    if key:
        h["Authorization"] = f"Bearer {key}"
    return requests.post(server.base + path, headers=h,
                         data=data if data is not None else json.dumps(body), timeout=timeout)


def assert_openai_error(r, status):
    assert r.status_code == status, r.text
    e = r.json()["error"]
    assert set(e) == {"message", "type", "param", "code"} and e["message"]
    return e


def test_errors(server, client):
    base = {"model": MODEL, "messages": MSGS}
    assert_openai_error(raw(server, base, key=None), 401)
    assert_openai_error(raw(server, base, key="wrong"), 401)
    with pytest.raises(openai.AuthenticationError):
        openai.OpenAI(base_url=server.base + "/v1", api_key="nope",
                      max_retries=0).models.list()
    with pytest.raises(openai.NotFoundError):
        client.chat.completions.create(model="no-such-model", messages=MSGS)
    assert_openai_error(requests.get(server.base + "/v1/nothing-here",
                                     headers={"Authorization": f"Bearer {KEY}"}), 404)
    assert_openai_error(raw(server, None, data="{not json"), 400)
    assert_openai_error(raw(server, None, data=b'{"model":"gossamer-demo","messages":'
                                               b'[{"role":"user","content":"\xff\xfe"}]}'), 400)
    e = assert_openai_error(raw(server, dict(base, temperature="hot")), 400)
    assert "temperature" in e["message"]
    e = assert_openai_error(raw(server, dict(base, messages=[{"role": "wizard",
                                                              "content": "x"}])), 400)
    assert "role" in e["message"]
    bad_tool = [{"type": "function", "function": {"name": "f", "parameters": "not an object"}}]
    assert_openai_error(raw(server, dict(base, tools=bad_tool)), 400)
    # Features this server does not offer are the client's error too (400, not 500).
    image = [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "x"}}]}]
    e = assert_openai_error(raw(server, dict(base, messages=image)), 400)
    assert "image_url" in e["message"] and e["type"] == "invalid_request_error"
    web = [{"type": "web_search"}]
    assert_openai_error(raw(server, dict(base, tools=web)), 400)
    e = assert_openai_error(raw(server, dict(base, max_tokens=100000)), 400)
    assert "2048" in e["message"]
    assert_openai_error(raw(server, dict(base, messages="x" * 70000)), 413)
    with pytest.raises(openai.BadRequestError):
        client.completions.create(model=MODEL, prompt=[10**9], max_tokens=2)
    assert requests.get(server.base + "/health").status_code == 200  # still alive


def test_disconnect_cancels_and_metrics(server):
    h = {"Authorization": f"Bearer {KEY}"}
    body = {"model": MODEL, "messages": MSGS, "max_tokens": 1500, "stream": True}
    with requests.post(server.base + "/v1/chat/completions", headers=h, json=body,
                       stream=True, timeout=30) as r:
        lines = r.iter_lines()
        for _ in range(3):
            next(lines)
    deadline = time.time() + 20
    while time.time() < deadline:
        m = requests.get(server.base + "/metrics").text
        vals = {ln.split("{")[0]: float(ln.split()[-1]) for ln in m.splitlines()
                if ln and not ln.startswith("#") and "_bucket" not in ln}
        if vals["gossamer_num_requests_running"] == 0 and \
                vals["gossamer_kv_cache_usage_perc"] == 0:
            break
        time.sleep(0.2)
    assert vals["gossamer_num_requests_running"] == 0
    assert vals["gossamer_kv_cache_usage_perc"] == 0
    assert 'finished_reason="cancelled"' in m
    assert vals["gossamer_generation_tokens_total"] > 0
    assert vals["gossamer_prefix_cache_hits_total"] > 0
    assert "gossamer_time_to_first_token_seconds_bucket" in m
    assert "gossamer_inter_token_latency_seconds_count" in m
    assert "gossamer_e2e_request_latency_seconds_sum" in m


def test_tokenize_detokenize(server, tokenizer_json):
    from tokenizers import Tokenizer
    tok = Tokenizer.from_file(str(tokenizer_json))
    h = {"Authorization": f"Bearer {KEY}"}
    t = requests.post(server.base + "/tokenize", headers=h, json={"prompt": "héllo wörld"}).json()
    assert t["tokens"] == tok.encode("héllo wörld").ids
    d = requests.post(server.base + "/detokenize", headers=h, json={"tokens": t["tokens"]}).json()
    assert d["prompt"] == "héllo wörld"


def test_queue_full_gives_429(server, cache, tokenizer_json):
    s = Server(cache, tokenizer_json, "--max-queue", "1", "--max-num-seqs", "1")
    try:
        body = {"model": MODEL, "messages": MSGS, "max_tokens": 40}

        def one(_):
            return raw(s, body, key=None, timeout=300)

        with concurrent.futures.ThreadPoolExecutor(16) as ex:
            rs = list(ex.map(one, range(16)))
        codes = [r.status_code for r in rs]
        assert 200 in codes and 429 in codes, codes
        r429 = next(r for r in rs if r.status_code == 429)
        assert r429.headers.get("Retry-After") == "1"
        assert_openai_error(r429, 429)
    finally:
        assert s.stop() == 0


def _byte_level_tokenizer(tokenizer_json):
    """The tokenizers library's tokenizer and an id -> bytes map (GPT-2 byte-level alphabet)."""
    from tokenizers import Tokenizer
    tok = Tokenizer.from_file(str(tokenizer_json))
    bs = (list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1))
          + list(range(ord("®"), ord("ÿ") + 1)))
    cs, n = bs[:], 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    inv = {chr(c): b for b, c in zip(bs, cs)}

    def token_bytes(i):
        return bytes(inv[ch] for ch in tok.id_to_token(i))

    return tok, token_bytes


def test_completions_echo_returns_prompt_then_completion(client, tokenizer_json):
    tok, _ = _byte_level_tokenizer(tokenizer_json)
    prompt = "The quick brown fox"
    ids = tok.encode("héllo wörld, 1234 ✓").ids
    for p, echoed in ((prompt, prompt), (ids, tok.decode(ids))):
        base = client.completions.create(model=MODEL, prompt=p, max_tokens=6, temperature=0)
        r = client.completions.create(model=MODEL, prompt=p, max_tokens=6, temperature=0,
                                      echo=True)
        assert r.choices[0].text == echoed + base.choices[0].text
        assert r.usage.completion_tokens == base.usage.completion_tokens
        assert r.usage.prompt_tokens == base.usage.prompt_tokens
        chunks = list(client.completions.create(model=MODEL, prompt=p, max_tokens=6,
                                                temperature=0, echo=True, stream=True))
        texts = [ch.choices[0].text for ch in chunks if ch.choices]
        assert texts[0] == echoed  # the prompt comes first, on its own
        assert "".join(texts) == r.choices[0].text
    # A batch: every choice echoes its own prompt.
    r = client.completions.create(model=MODEL, prompt=[ids, ids[:3]], max_tokens=2,
                                  temperature=0, echo=True)
    assert r.choices[0].text.startswith(tok.decode(ids))
    assert r.choices[1].text.startswith(tok.decode(ids[:3]))


def test_completions_echo_prompt_logprobs_score_only(client, tokenizer_json):
    import math
    tok, token_bytes = _byte_level_tokenizer(tokenizer_json)
    prompt = "Scoring: the cat sat on the mat. Ünïcödé ✓ 12345"
    ids = tok.encode(prompt).ids  # independent oracle for the token list
    r = client.completions.create(model=MODEL, prompt=prompt, max_tokens=0, echo=True,
                                  logprobs=2)
    c = r.choices[0]
    assert c.text == prompt and c.finish_reason == "length"
    assert r.usage.completion_tokens == 0 and r.usage.prompt_tokens == len(ids)
    lp = c.logprobs
    assert len(lp.tokens) == len(lp.token_logprobs) == len(lp.top_logprobs) == len(ids)
    for i, s in zip(ids, lp.tokens):
        b = token_bytes(i)
        try:
            assert s == b.decode("utf-8")
        except UnicodeDecodeError:
            pass  # a token holding part of a character: its string has replacement chars
    assert lp.token_logprobs[0] is None and lp.top_logprobs[0] is None
    for v, top in zip(lp.token_logprobs[1:], lp.top_logprobs[1:]):
        assert math.isfinite(v) and v <= 0
        vals = list(top.values())
        assert 1 <= len(top) <= 2 and all(math.isfinite(x) and x <= 0 for x in vals)
        assert vals == sorted(vals, reverse=True) and v <= vals[0] + 1e-5
    offsets = [0]
    for i in ids[:-1]:
        offsets.append(offsets[-1] + len(token_bytes(i)))
    assert lp.text_offset == offsets
    assert offsets[-1] + len(token_bytes(ids[-1])) == len(prompt.encode())
    # Streaming: the prompt and all its logprobs first, then the end.
    chunks = list(client.completions.create(model=MODEL, prompt=prompt, max_tokens=0,
                                            echo=True, logprobs=2, stream=True))
    chunks = [ch for ch in chunks if ch.choices]
    assert chunks[0].choices[0].text == prompt
    assert chunks[0].choices[0].logprobs.token_logprobs == lp.token_logprobs
    assert chunks[-1].choices[0].finish_reason == "length"
    assert "".join(ch.choices[0].text for ch in chunks) == prompt
    # Without logprobs: the echoed prompt only.
    r = client.completions.create(model=MODEL, prompt=ids, max_tokens=0, echo=True)
    assert r.choices[0].text == tok.decode(ids) and r.choices[0].logprobs is None


def test_completions_prompt_scoring_matches_generation(client, tokenizer_json):
    """Decode-path logprobs of a greedy continuation == prompt-path logprobs of the same ids."""
    tok, token_bytes = _byte_level_tokenizer(tokenizer_json)
    # The generated ids are recovered from their token strings: pick a prompt whose greedy
    # continuation holds only tokens whose bytes are whole UTF-8 (one id per string).
    by_string = {}
    for i in range(tok.get_vocab_size()):
        try:
            by_string.setdefault(token_bytes(i).decode("utf-8"), i)
        except (UnicodeDecodeError, KeyError, TypeError):
            pass
    for seed_text in ("Once upon a time", "In the beginning", "Dear diary,", "1, 2, 3,",
                      "The weather today", "Hello there", "Numbers:", "A B C D"):
        ids = tok.encode(seed_text).ids
        g = client.completions.create(model=MODEL, prompt=ids, max_tokens=8, temperature=0,
                                      logprobs=1, extra_body={"ignore_eos": True})
        glp = g.choices[0].logprobs
        gen = [by_string.get(s) for s in glp.tokens]
        if len(gen) == 8 and None not in gen and all(token_bytes(i).decode("utf-8") == s
                                                     for i, s in zip(gen, glp.tokens)):
            break
    else:
        pytest.fail("no greedy continuation made only of whole-character tokens")
    s = client.completions.create(model=MODEL, prompt=ids + gen, max_tokens=0, echo=True,
                                  logprobs=1)
    slp = s.choices[0].logprobs
    assert slp.tokens[len(ids):] == glp.tokens
    for j in range(8):
        got, want = slp.token_logprobs[len(ids) + j], glp.token_logprobs[j]
        assert abs(got - want) <= 1e-3 * max(abs(want), 1e-2), (j, got, want)
        # greedy: the scored position's most likely token is the generated one
        assert list(slp.top_logprobs[len(ids) + j]) == [glp.tokens[j]], j


def test_completions_max_tokens_zero_needs_echo(server, client):
    for body in ({"prompt": "x", "max_tokens": 0}, {"prompt": "x", "max_tokens": 0, "echo": False}):
        e = assert_openai_error(raw(server, dict(body, model=MODEL), path="/v1/completions"), 400)
        assert e["param"] == "max_tokens" and "max_tokens" in e["message"], e
        assert "echo" in e["message"], e
    e = assert_openai_error(raw(server, {"model": MODEL, "messages": MSGS, "max_tokens": 0}), 400)
    assert e["param"] == "max_tokens"
    e = assert_openai_error(raw(server, {"model": MODEL, "prompt": "x", "echo": "yes"},
                                path="/v1/completions"), 400)
    assert e["param"] == "echo"


def test_listen_backlog_takes_a_burst_of_connects(server):
    """While the server is stopped (SIGSTOP: nothing accepts), the kernel completes handshakes
    only up to the listen backlog. httplib's built-in backlog of 5 left the rest of a burst of
    64 clients waiting for the 1 s SYN retry; every one of them must connect at once."""
    socks = []
    os.kill(server.proc.pid, signal.SIGSTOP)
    try:
        for _ in range(64):
            s = socket.socket()
            s.setblocking(False)
            s.connect_ex(("127.0.0.1", server.port))
            socks.append(s)
        deadline = time.time() + 0.5
        pending = list(socks)
        while pending and time.time() < deadline:
            _, writable, _ = select.select([], pending, [], 0.05)
            pending = [s for s in pending if s not in writable]
        errors = [s.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR) for s in socks
                  if s not in pending]
        assert not pending and not any(errors), f"{len(pending)} of 64 connects still pending"
    finally:
        os.kill(server.proc.pid, signal.SIGCONT)
        for s in socks:
            s.close()
    assert requests.get(server.base + "/health", timeout=10).status_code == 200


def test_a_port_in_use_is_refused(server, tokenizer_json, tmp_path):
    """A second server on a live server's port exits with an error naming the address (httplib's
    default SO_REUSEPORT would have let both listen and split the connections)."""
    p = subprocess.run([gossamer_bin(), "serve", "--port", str(server.port), "--tokenizer",
                        str(tokenizer_json), "--backend", "fake"], capture_output=True, text=True,
                       timeout=120, env=dict(os.environ, GOSSAMER_CACHE=str(tmp_path)))
    assert p.returncode != 0 and f"cannot listen on 127.0.0.1:{server.port}" in p.stderr, p.stderr
