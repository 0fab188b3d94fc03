"""The server's chat completions and Responses API through the openai SDK: models list, plain and
streamed chat (stream == blocking), prompt token count vs openai-harmony, greedy determinism and
prefix-cache hits, seeds, reasoning effort, named / "none" / "auto" / "required" tool choice,
logprobs with `n`, Responses blocking and streamed; a disconnect cancels a streamed chat and
frees its blocks, and /metrics counts it all.
"""
import time

import openai
import pytest
import requests

from server_util import KEY, MODEL, MSGS, keyed_server_fixtures

server, client = keyed_server_fixtures()


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


# Last in this module: the prefix-cache hits it expects in /metrics are those of the tests above
# (test_greedy_is_deterministic_and_prefix_cached), on the same server.
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
