"""Harmony chat format: gossamer's renderer and streaming parser against openai-harmony.

Rendering: every conversation (hand-written fixtures in tests/data/harmony plus a seeded random
set) is mapped to openai-harmony objects the way an OpenAI-compatible server should (the mapping
documented in docs/harmony.md, rebuilt here independently in Python), rendered with
`render_conversation_for_completion(..., Role.ASSISTANT)`, and compared token for token with
`gossamer apply-template --jsonl` (one process for the whole batch).

Parsing: assistant completions rendered by openai-harmony are fed to `gossamer apply-template
--parse --jsonl` and to openai-harmony's StreamableParser; channels, recipients and text must
agree, and the streamed events must concatenate to the non-streaming result.

openai-harmony reads the o200k vocabulary from $TIKTOKEN_ENCODINGS_BASE; we write it from the
real tokenizer.json (the file's sha256 is checked by openai-harmony), so nothing is downloaded.
"""
import base64
import json
import os
import pathlib
import random

import pytest

REPO = pathlib.Path(__file__).resolve().parents[2]
DATA = REPO / "tests" / "data" / "harmony"
DATE = "2025-06-28"


# ---------------------------------------------------------------------------------------------
# openai-harmony setup (offline)
# ---------------------------------------------------------------------------------------------
def _bytes_to_unicode():
    bs = (list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) +
          list(range(ord("®"), ord("ÿ") + 1)))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return {chr(c): b for b, c in zip(bs, cs)}


@pytest.fixture(scope="session")
def harmony(tokenizer_json, tmp_path_factory):
    vocab = json.loads(tokenizer_json.read_text())["model"]["vocab"]
    dec = _bytes_to_unicode()
    lines = [base64.b64encode(bytes(dec[ch] for ch in tok)).decode() + f" {rank}\n"
             for tok, rank in sorted(vocab.items(), key=lambda kv: kv[1])]
    base = tmp_path_factory.mktemp("tiktoken")
    (base / "o200k_base.tiktoken").write_text("".join(lines))
    os.environ["TIKTOKEN_ENCODINGS_BASE"] = str(base)
    os.environ["TIKTOKEN_RS_CACHE_DIR"] = str(base)
    import openai_harmony as oh
    return oh, oh.load_harmony_encoding(oh.HarmonyEncodingName.HARMONY_GPT_OSS)


# ---------------------------------------------------------------------------------------------
# OpenAI request -> openai-harmony Conversation (the documented server mapping)
# ---------------------------------------------------------------------------------------------
def _text(content):
    if content is None or isinstance(content, str):
        return content
    return "".join(part["text"] for part in content)


def to_conversation(oh, req, date=DATE):
    effort = req.get("reasoning_effort") or (req.get("reasoning") or {}).get("effort") or "medium"
    tools = req.get("tools") or []
    visible = bool(tools) and req.get("tool_choice") != "none"
    sys_content = (oh.SystemContent.new()
                   .with_reasoning_effort({"low": oh.ReasoningEffort.LOW,
                                           "medium": oh.ReasoningEffort.MEDIUM,
                                           "high": oh.ReasoningEffort.HIGH}[effort])
                   .with_conversation_start_date(date))
    msgs = [oh.Message.from_role_and_content(oh.Role.SYSTEM, sys_content)]
    rest = list(req["messages"])
    instructions = []
    while rest and rest[0]["role"] in ("system", "developer"):
        instructions.append(_text(rest.pop(0)["content"]))
    if instructions or visible:
        dev = oh.DeveloperContent.new()
        if instructions:
            dev = dev.with_instructions("\n\n".join(instructions))
        if visible:
            dev = dev.with_function_tools([
                oh.ToolDescription.new(t["function"]["name"], t["function"].get("description") or "",
                                       t["function"].get("parameters")) for t in tools])
        msgs.append(oh.Message.from_role_and_content(oh.Role.DEVELOPER, dev))
    call_names = {}
    A = oh.Role.ASSISTANT
    for m in rest:
        role = m["role"]
        if role in ("system", "developer"):
            msgs.append(oh.Message.from_role_and_content(
                oh.Role.DEVELOPER, oh.DeveloperContent.new().with_instructions(_text(m["content"]))))
        elif role == "user":
            msgs.append(oh.Message.from_role_and_content(oh.Role.USER, _text(m["content"])))
        elif role == "assistant":
            reasoning = m.get("reasoning_content", m.get("reasoning"))
            content = _text(m.get("content"))
            calls = m.get("tool_calls") or []
            if reasoning is not None:
                msgs.append(oh.Message.from_role_and_content(A, reasoning).with_channel("analysis"))
            if not calls:
                if content is not None:
                    msgs.append(oh.Message.from_role_and_content(A, content).with_channel("final"))
                continue
            if content:
                msgs.append(oh.Message.from_role_and_content(A, content).with_channel("commentary"))
            for c in calls:
                args = c["function"]["arguments"]
                if not isinstance(args, str):
                    args = json.dumps(args, separators=(",", ":"), ensure_ascii=False)
                call_names[c["id"]] = c["function"]["name"]
                msgs.append(oh.Message.from_role_and_content(A, args).with_channel("commentary")
                            .with_recipient("functions." + c["function"]["name"])
                            .with_content_type("<|constrain|>json"))
        elif role == "tool":
            author = oh.Author.new(oh.Role.TOOL, "functions." + call_names[m["tool_call_id"]])
            msgs.append(oh.Message.from_author_and_content(author, _text(m["content"]))
                        .with_recipient("assistant").with_channel("commentary"))
    return oh.Conversation.from_messages(msgs)


# ---------------------------------------------------------------------------------------------
# Random conversations
# ---------------------------------------------------------------------------------------------
TEXTS = [
    "Hello!", "What is the capital of France?", "  spaces  around  ", "line one\nline two\n\n",
    "日本語のテキスト", "emoji 😀🎉 mix", "code: `def f(x):\n    return x**2`", "1234567890 3.14159",
    "Ünïcödé façade naïve", "<|start|>assistant<|message|>not special<|end|>", "tab\tseparated\tvalues",
    "", "x", "Ελληνικά και русский", "{\"json\": [1, 2, {\"a\": null}]}", "trailing newline\n",
    "a" * 300, "mixed 中文 and English, with punctuation!?", "\u200bzero width", "CRLF\r\nline",
]

SCHEMAS = [
    None,
    {"type": "object", "properties": {}},
    {"type": "object", "properties": {"q": {"type": "string", "description": "query"}}, "required": ["q"]},
    {"type": "object", "properties": {
        "n": {"type": "integer", "default": 5}, "ratio": {"type": "number", "default": 0.5},
        "flag": {"type": "boolean", "default": False}, "names": {"type": "array", "items": {"type": "string"}},
        "unit": {"type": "string", "enum": ["c", "f"], "default": "c", "description": "unit\nof measure"}},
     "required": ["n"]},
    {"type": "object", "description": "outer", "properties": {
        "inner": {"type": "object", "description": "inner obj", "properties": {
            "deep": {"type": "object", "properties": {"leaf": {"type": ["string", "integer", "null"]}}}},
            "required": ["deep"]},
        "list": {"type": "array", "items": {"type": "object", "properties": {"k": {"type": "string"}}}},
        "maybe": {"anyOf": [{"type": "string"}, {"type": "integer"}]},
        "either": {"oneOf": [{"type": "string"}, {"type": "integer", "nullable": True}]},
        "untyped": {"description": "no type"},
        "arr_any": {"type": "array"}}},
    {"type": "object", "properties": {
        "title_prop": {"type": "string", "title": "Title", "examples": ["ex1", "ex2"]},
        "nullable": {"type": "string", "nullable": True, "default": "dflt"},
        "obj_default": {"type": "object", "default": {"a": [1, 2.5, "s"], "b": {"c": True}}},
        "str_enum_only": {"enum": ["x", "y"]}}},
    {"oneOf": [{"type": "object", "properties": {"a": {"type": "string"}}},
               {"type": "string", "description": "plain", "default": "z"}]},
]

TOOL_NAMES = ["get_weather", "search", "calc.add", "run-code", "lookup_ü", "a", "ToolWith$Dollar"]
DESCRIPTIONS = ["", "Does a thing.", "Multi\nline\ndescription", "Trailing newline\n", "Uses CRLF\r\nok",
                "Ünïcödé description 😀"]


def random_tools(rng):
    names = rng.sample(TOOL_NAMES, rng.randint(1, 3))
    tools = []
    for name in names:
        fn = {"name": name}
        d = rng.choice(DESCRIPTIONS + [None])
        if d is not None:
            fn["description"] = d
        schema = rng.choice(SCHEMAS)
        if schema is not None:
            fn["parameters"] = json.loads(json.dumps(schema))
        tools.append({"type": "function", "function": fn})
    return tools


def random_turn(rng, tools, msgs, next_id):
    """Appends one user turn and maybe the assistant's answer (final or a tool loop)."""
    msgs.append({"role": "user", "content": rng.choice(TEXTS)})
    r = rng.random()
    if r < 0.2:
        return next_id
    thinking = {}
    if rng.random() < 0.6:
        thinking = {rng.choice(["reasoning_content", "reasoning"]): rng.choice(TEXTS)}
    if tools and r < 0.6:
        calls = []
        for _ in range(rng.randint(1, 2)):
            next_id += 1
            args = rng.choice(['{"q": "x"}', '{}', '{"city": "Zürich", "n": 3}', '{"a": [1, 2]}'])
            calls.append({"id": f"call_{next_id}", "type": "function",
                          "function": {"name": rng.choice(tools)["function"]["name"], "arguments": args}})
        content = rng.choice([None, None, "Let me check that.", ""])
        msgs.append({"role": "assistant", "content": content, "tool_calls": calls, **thinking})
        for c in calls:
            if rng.random() < 0.9:
                msgs.append({"role": "tool", "tool_call_id": c["id"], "content": rng.choice(TEXTS)})
        if rng.random() < 0.5:
            msgs.append({"role": "assistant", "content": rng.choice(TEXTS), **thinking})
    else:
        msgs.append({"role": "assistant", "content": rng.choice(TEXTS), **thinking})
    return next_id


def random_request(rng):
    req = {"messages": []}
    if rng.random() < 0.7:
        req["reasoning_effort"] = rng.choice(["low", "medium", "high"])
    tools = random_tools(rng) if rng.random() < 0.6 else []
    if tools:
        req["tools"] = tools
        choice = rng.choice([None, "auto", "none", "required", "named"])
        if choice == "named":
            req["tool_choice"] = {"type": "function", "function": {"name": tools[0]["function"]["name"]}}
        elif choice is not None:
            req["tool_choice"] = choice
    for _ in range(rng.choice([0, 0, 1, 1, 2])):
        req["messages"].append({"role": rng.choice(["system", "developer"]), "content": rng.choice(TEXTS)})
    next_id = 0
    for _ in range(rng.randint(1, 3)):
        next_id = random_turn(rng, tools, req["messages"], next_id)
    if rng.random() < 0.15:
        req["messages"].insert(len(req["messages"]) - 1,
                               {"role": "system", "content": "Mid-conversation instruction."})
    return req


def fixture_requests():
    out = []
    for path in sorted(DATA.glob("*.json")):
        out.append((path.name, json.loads(path.read_text())["request"]))
    return out


def run_jsonl(gossamer, tokenizer_json, lines, *extra):
    p = gossamer("apply-template", "--tokenizer", tokenizer_json, *extra, "--jsonl",
                 input="".join(json.dumps(x, ensure_ascii=False) + "\n" for x in lines).encode())
    outs = [json.loads(line) for line in p.stdout.decode().splitlines()]
    assert len(outs) == len(lines)
    return outs


# ---------------------------------------------------------------------------------------------
# Tests
# ---------------------------------------------------------------------------------------------
def test_render_matches_openai_harmony(gossamer, tokenizer_json, harmony):
    oh, enc = harmony
    seed = random.SystemRandom().randrange(2**32)
    print(f"seed={seed}")
    rng = random.Random(seed)
    cases = fixture_requests() + [(f"random[{i}]", random_request(rng)) for i in range(150)]
    outs = run_jsonl(gossamer, tokenizer_json, [req for _, req in cases], "--date", DATE)
    mismatches = []
    for (name, req), out in zip(cases, outs):
        assert "error" not in out, f"{name}: {out['error']}\n{json.dumps(req)}"
        want = enc.render_conversation_for_completion(to_conversation(oh, req), oh.Role.ASSISTANT)
        if out["ids"] != want:
            mismatches.append(f"{name}:\n  request={json.dumps(req, ensure_ascii=False)}\n"
                              f"  oracle={enc.decode(want)!r}\n  gossamer={out['text']!r}")
        assert enc.decode(want) == out["text"] or out["ids"] != want
    print(f"conversations checked: {len(cases)} (fixtures: {len(fixture_requests())}), "
          f"token-identical: {len(cases) - len(mismatches)}")
    assert not mismatches, "\n".join(mismatches[:5])


def test_default_date_is_today_utc(gossamer, tokenizer_json):
    import datetime
    before = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d")
    out = run_jsonl(gossamer, tokenizer_json, [{"messages": [{"role": "user", "content": "hi"}]}])[0]
    after = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d")
    assert f"Current date: {before}" in out["text"] or f"Current date: {after}" in out["text"]


BAD_REQUESTS = [
    ({"messages": [{"role": "wizard", "content": "x"}]}, "messages[0].role"),
    ({"messages": [{"role": "user", "content": 5}]}, "messages[0].content"),
    ({"messages": [{"role": "user"}]}, "messages[0].content"),
    ({"messages": []}, "messages"),
    ({"model": "x"}, "messages"),
    ({"messages": "hi"}, "messages"),
    ({"messages": [{"role": "user", "content": "x"}], "tools": [{"type": "function", "function": {"name": "f", "parameters": "not a schema"}}]}, "tools[0].function.parameters"),
    ({"messages": [{"role": "user", "content": "x"}], "tools": [{"type": "function", "function": {"name": "f", "parameters": [1]}}]}, "tools[0].function.parameters"),
    ({"messages": [{"role": "user", "content": "x"}], "tools": [{"type": "function", "function": {"description": "no name"}}]}, "tools[0].function.name"),
    ({"messages": [{"role": "user", "content": "x"}], "tools": {"a": 1}}, "tools"),
    ({"messages": [{"role": "user", "content": "x"}], "reasoning_effort": "extreme"}, "reasoning_effort"),
    ({"messages": [{"role": "user", "content": "x"}], "reasoning_effort": 3}, "reasoning_effort"),
    ({"messages": [{"role": "user", "content": "x"}], "tool_choice": "sometimes"}, "tool_choice"),
    ({"messages": [{"role": "user", "content": "x"}], "tool_choice": {"type": "function", "function": {"name": "missing"}},
      "tools": [{"type": "function", "function": {"name": "f"}}]}, "tool_choice.function.name"),
    ({"messages": [{"role": "user", "content": "x"}, {"role": "tool", "tool_call_id": "nope", "content": "r"}]}, "messages[1].tool_call_id"),
    ({"messages": [{"role": "user", "content": "x"}, {"role": "assistant", "tool_calls": [{"id": "a", "type": "function", "function": {"name": "f"}}]}]}, "messages[1].tool_calls[0].function.arguments"),
    ({"messages": [{"role": "user", "content": "x"}, {"role": "assistant", "tool_calls": [{"id": "a", "function": {"arguments": "{}"}}]}]}, "messages[1].tool_calls[0].function.name"),
    ({"messages": [{"role": "user", "content": "x"}, {"role": "assistant", "content": None}]}, "messages[1]"),
    ({"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "x"}}]}]}, "messages[0].content[0].type"),
    ({"messages": [{"role": "assistant", "content": "x", "reasoning_content": 7}]}, "messages[0].reasoning_content"),
    ({"messages": [{"role": "user", "content": "x"}], "tools": [{"type": "function", "function": {"name": "f"}}, {"type": "function", "function": {"name": "f"}}]}, "tools[1].function.name"),
]


def test_malformed_requests_name_the_field(gossamer, tokenizer_json):
    outs = run_jsonl(gossamer, tokenizer_json, [r for r, _ in BAD_REQUESTS])
    for (req, field), out in zip(BAD_REQUESTS, outs):
        assert "error" in out, f"accepted malformed request {req}"
        assert field in out["error"], f"error {out['error']!r} does not name {field!r}"
    p = gossamer("apply-template", "--tokenizer", tokenizer_json, input=b'{"messages": [', check=False)
    assert p.returncode == 2 and b"invalid JSON at byte" in p.stderr


def random_completion(oh, rng):
    """A list of assistant messages as the model would generate them, ending in a stop token."""
    A = oh.Role.ASSISTANT
    msgs = []
    if rng.random() < 0.8:
        msgs.append(oh.Message.from_role_and_content(A, rng.choice(TEXTS) or "t").with_channel("analysis"))
    kind = rng.random()
    if kind < 0.45:
        for _ in range(rng.randint(1, 2)):
            if rng.random() < 0.3:
                msgs.append(oh.Message.from_role_and_content(A, "Checking.").with_channel("commentary"))
            ct = rng.choice(["<|constrain|>json", "json", None])
            m = (oh.Message.from_role_and_content(A, rng.choice(['{"q": "Zürich 😀"}', '{}', '{"a": [1, 2]}']))
                 .with_channel("commentary").with_recipient("functions." + rng.choice(TOOL_NAMES)))
            msgs.append(m.with_content_type(ct) if ct else m)
    else:
        msgs.append(oh.Message.from_role_and_content(A, rng.choice(TEXTS)).with_channel("final"))
    return msgs


def completion_tokens(oh, enc, msgs, rng):
    toks = []
    for m in msgs:
        toks += enc.render(m)
    start, assistant = toks[0], toks[1]
    assert enc.decode([start, assistant]) == "<|start|>assistant"
    toks = toks[2:]  # the prompt ends with <|start|>assistant
    end = toks.pop()  # <|end|> or <|call|>
    if msgs[-1].recipient is None:
        end = enc.encode("<|return|>", allowed_special="all")[0]
    return toks + [end]


def test_parser_matches_streamable_parser(gossamer, tokenizer_json, harmony):
    oh, enc = harmony
    seed = random.SystemRandom().randrange(2**32)
    print(f"seed={seed}")
    rng = random.Random(seed)
    completions = [completion_tokens(oh, enc, msgs, rng) for msgs in
                   (random_completion(oh, rng) for _ in range(120))]
    outs = run_jsonl(gossamer, tokenizer_json, completions, "--parse", "--seed", "7")
    for toks, out in zip(completions, outs):
        parser = oh.StreamableParser(enc, role=oh.Role.ASSISTANT)
        for t in toks:
            parser.process(t)
        ref = parser.messages
        res = out["result"]
        reasoning = "".join(m.content[0].text for m in ref if m.channel == "analysis" and not m.recipient)
        content = "".join(m.content[0].text for m in ref if m.channel in ("final", "commentary") and not m.recipient)
        calls = [(m.recipient[len("functions."):], m.content[0].text) for m in ref if m.recipient]
        assert res["reasoning"] == reasoning
        assert res["content"] == content
        assert [(c["name"], c["arguments"]) for c in res["tool_calls"]] == calls
        assert res["warnings"] == [], res["warnings"]
        assert res["stopped"] and not res["truncated"]
        assert res["finish"] == ("tool_calls" if calls else "stop")
        ends = [e["channel"] for e in out["events"] if e["type"] == "message_end"]
        assert ends == [m.channel for m in ref]
        # the streamed events concatenate to the non-streaming result
        streamed = {"reasoning_delta": "", "content_delta": ""}
        args = {}
        for e in out["events"]:
            if e["type"] in streamed:
                streamed[e["type"]] += e["text"]
            elif e["type"] == "tool_call_arguments_delta":
                args[e["index"]] = args.get(e["index"], "") + e["text"]
        assert streamed["reasoning_delta"] == res["reasoning"]
        assert streamed["content_delta"] == res["content"]
        assert [args.get(i, "") for i in range(len(calls))] == [c[1] for c in calls]
    print(f"completions cross-checked with StreamableParser: {len(completions)}")


def test_parser_budget_exhausted_in_reasoning(gossamer, tokenizer_json, harmony):
    oh, enc = harmony
    toks = enc.render(oh.Message.from_role_and_content(oh.Role.ASSISTANT, "Let me think about this at length")
                      .with_channel("analysis"))[2:-3]  # cut off: no <|end|>, no stop token
    out = run_jsonl(gossamer, tokenizer_json, [toks], "--parse")[0]["result"]
    assert out["truncated"] and out["reasoning_only"] and out["content"] == ""
    assert out["finish"] == "length"
    assert "Let me think about this" in out["reasoning"]


def test_model_dir_and_text_mode(gossamer, tokenizer_json, tmp_path):
    (tmp_path / "tokenizer.json").symlink_to(tokenizer_json)
    req = json.dumps({"messages": [{"role": "user", "content": "Hi there"}]}).encode()
    by_model = gossamer("apply-template", "--model", tmp_path, "--date", DATE, input=req).stdout.decode()
    by_file = gossamer("apply-template", "--tokenizer", tokenizer_json, "--date", DATE, input=req).stdout.decode()
    assert by_model == by_file
    ids_line, text = by_model.split("\n", 1)
    assert text.endswith("<|start|>user<|message|>Hi there<|end|><|start|>assistant\n")
    assert len(ids_line.split()) > 10
    p = gossamer("apply-template", "--date", DATE, input=req, check=False)
    assert p.returncode == 2 and b"--model or --tokenizer" in p.stderr
