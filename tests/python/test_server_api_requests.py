"""The server's request features through the openai SDK (demo model): tool_choice "required"
with several tools (grammar-constrained name), batched /v1/completions, stored responses with
previous_response_id (and their LRU bound), chat logprobs that cover the content, Responses
logprobs / extensions / echoed fields, context-length errors.
"""
import openai
import pytest
import requests

from server_api_util import MSGS, api_server_fixtures
from server_util import MODEL

server, client = api_server_fixtures()


def tool(name):
    return {"type": "function", "function": {
        "name": name, "description": f"The {name} tool",
        "parameters": {"type": "object", "properties": {"q": {"type": "string"}}}}}


NAMES = ["get_weather", "get_time", "lookup_user", "get"]
TOOLS = [tool(n) for n in NAMES]


# ------------------------------------------------------------------------------------------------
# tool_choice "required" with several tools
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
# /v1/completions with a batch of prompts
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
# /v1/responses: store, previous_response_id, GET / DELETE
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
# chat logprobs cover the content
# ------------------------------------------------------------------------------------------------
def test_chat_logprobs_cover_the_content(client):
    """Every content token has its entry, blocking and streamed (header-less text that the parser
    keeps as content when generation ends is the exception: content non-empty, entries [])."""
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




# ------------------------------------------------------------------------------------------------
# /v1/responses: output_text logprobs, the sampling extensions, echoed fields, errors
# ------------------------------------------------------------------------------------------------
def entries(r):
    return [(e.token, e.logprob, [t.token for t in e.top_logprobs])
            for o in r.output if o.type == "message" for p in o.content for e in p.logprobs]


def test_responses_logprobs_match_chat(client):
    """include: ["message.output_text.logprobs"] gives the content tokens' entries: the same as
    Chat Completions' logprobs for the same prompt and seed (the same sampled tokens)."""
    with_content = 0
    for seed in range(6):
        c = client.chat.completions.create(
            model=MODEL, messages=[{"role": "user", "content": "Say hi"}], max_tokens=12,
            temperature=1, seed=seed, logprobs=True, top_logprobs=2)
        kw = dict(model=MODEL, input="Say hi", max_output_tokens=12, temperature=1,
                  top_logprobs=2, include=["message.output_text.logprobs"],
                  extra_body={"seed": seed})
        r = client.responses.create(**kw)
        assert r.usage.input_tokens == c.usage.prompt_tokens
        want = [(e.token, e.logprob, [t.token for t in e.top_logprobs])
                for e in (c.choices[0].logprobs.content or [])]
        got = entries(r)
        assert [g[0] for g in got] == [w[0] for w in want], seed
        assert all(abs(g[1] - w[1]) < 1e-5 and g[2] == w[2] for g, w in zip(got, want))
        assert all(len(g[2]) == 2 for g in got)
        with_content += bool(got)
        # Streamed: the deltas' entries add up to the done event's and the final response's.
        events = list(client.responses.create(stream=True, **kw))
        deltas = [e for ev in events if ev.type == "response.output_text.delta" for e in ev.logprobs]
        done = [e for ev in events if ev.type == "response.output_text.done" for e in ev.logprobs]
        assert [e.token for e in deltas] == [e.token for e in done] == [g[0] for g in got]
        assert entries(events[-1].response) == got
    assert with_content > 0
    # Without include, no entries.
    r = client.responses.create(model=MODEL, input="Say hi", max_output_tokens=12, top_logprobs=2)
    assert entries(r) == []


def test_responses_extensions_and_echoed_fields(client, server):
    kw = dict(model=MODEL, input="Hi", max_output_tokens=5)
    eos = {"200002": 100}  # <|return|> always: without ignore_eos one token, with it the budget
    assert client.responses.create(**kw, extra_body={"logit_bias": eos}).usage.output_tokens == 1
    r = client.responses.create(**kw, extra_body={"logit_bias": eos, "ignore_eos": True})
    assert r.usage.output_tokens == 5
    a = client.responses.create(**kw, temperature=1, extra_body={"seed": 1, "top_k": 1})
    b = client.responses.create(**kw, temperature=0)
    assert a.output == [] or a.output_text == b.output_text  # top_k 1 is greedy
    r = client.responses.create(**kw, parallel_tool_calls=False, metadata={"k": "v"}, user="u",
                                reasoning={"effort": "low"})
    assert r.parallel_tool_calls is False and r.metadata == {"k": "v"} and r.user == "u"
    assert r.reasoning.effort == "low" and r.background is False
    for body, param in [({"metadata": {"k": 1}}, "metadata"), ({"user": 5}, "user"),
                        ({"parallel_tool_calls": "no"}, "parallel_tool_calls"),
                        ({"top_logprobs": 21}, "top_logprobs"), ({"include": "x"}, "include")]:
        with pytest.raises(openai.BadRequestError) as e:
            client.responses.create(**kw, extra_body=body)
        assert e.value.body["param"] == param, (body, e.value.body)
    # A function_call_output must answer a function_call of the conversation.
    with pytest.raises(openai.BadRequestError) as e:
        client.responses.create(model=MODEL, max_output_tokens=5, input=[
            {"type": "function_call_output", "call_id": "call_nope", "output": "42"}])
    assert e.value.body["param"] == "input[0].call_id" and "call_nope" in e.value.body["message"]


def test_context_length_errors_have_openais_code(client):
    with pytest.raises(openai.BadRequestError) as e:
        client.chat.completions.create(model=MODEL, messages=MSGS, max_tokens=10**9)
    assert e.value.body["code"] == "context_length_exceeded"
    assert e.value.body["param"] == "max_tokens"
    with pytest.raises(openai.BadRequestError) as e:
        client.responses.create(model=MODEL, input="Hi", max_output_tokens=10**9)
    assert e.value.body["code"] == "context_length_exceeded"
    assert e.value.body["param"] == "max_output_tokens"
    assert "max_output_tokens" in e.value.body["message"]
    assert "max_tokens" not in e.value.body["message"].replace("max_output_tokens", "")
    with pytest.raises(openai.BadRequestError) as e:
        client.completions.create(model=MODEL, prompt="Hi " * 5000, max_tokens=4)
    assert e.value.body["code"] == "context_length_exceeded"
