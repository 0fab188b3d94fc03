"""Harmony rendering: gossamer's chat-request renderer against openai-harmony, token for token.

Every conversation (hand-written fixtures in tests/data/harmony plus a seeded random set) is
mapped to openai-harmony objects the way an OpenAI-compatible server should (the mapping
documented in docs/harmony.md, rebuilt here independently in Python), rendered with
`render_conversation_for_completion(..., Role.ASSISTANT)`, and compared token for token with
`gossamer apply-template --jsonl` (one process for the whole batch). Also: malformed requests name
their field; the default date, `--model DIR` and the text mode of apply-template.
"""
import json
import random

from conftest import REPO, fresh_seed
from harmony_util import TEXTS, TOOL_NAMES, run_jsonl

DATA = REPO / "tests" / "data" / "harmony"
DATE = "2025-06-28"


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
            reasoning = next((m[k] for k in ("reasoning_content", "reasoning") if m.get(k) is not None), None)
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
                if c.get("id") is not None:
                    call_names[c["id"]] = c["function"]["name"]
                msgs.append(oh.Message.from_role_and_content(A, args).with_channel("commentary")
                            .with_recipient("functions." + c["function"]["name"])
                            .with_content_type("<|constrain|>json"))
        elif role == "tool":
            name = call_names[m["tool_call_id"]] if m.get("tool_call_id") is not None else m["name"]
            author = oh.Author.new(oh.Role.TOOL, "functions." + name)
            msgs.append(oh.Message.from_author_and_content(author, _text(m["content"]))
                        .with_recipient("assistant").with_channel("commentary"))
    return oh.Conversation.from_messages(msgs)


# ---------------------------------------------------------------------------------------------
# Random conversations
# ---------------------------------------------------------------------------------------------
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

DESCRIPTIONS = ["", "Does a thing.", "Multi\nline\ndescription", "Trailing newline\n", "Uses CRLF\r\nok",
                "Ünïcödé description 😀"]


DEFAULTS = ["dflt", "", "q\"uote\nnl", 0, -3, 2**64, 0.1, -0.0, 1e-7, 1e21, 123456.5, True, None, [],
            [1, "a", {"k": None}], {"b": [False, 2.5]}]
SCALARS = ["string", "integer", "number", "boolean", "null", "weird"]


def random_schema(rng, depth=0, obj=False):
    """A random JSON schema: nested objects, arrays, enums, oneOf/anyOf/allOf, type lists, nullable,
    defaults, titles, examples, descriptions (some of them not schemas openai-harmony expects)."""
    s, r = {}, rng.random()
    if obj or (depth < 3 and r < 0.25):
        s["type"] = "object"
        if rng.random() < 0.9:
            props = {k: random_schema(rng, depth + 1) for k in
                     rng.sample(["a", "city", "n_2", "ünï", "with-dash", "a b", "type", ""], rng.randint(0, 5))}
            s["properties"] = props
            if rng.random() < 0.7:
                s["required"] = rng.sample(list(props), rng.randint(0, len(props))) + ["absent"] * (r < 0.05)
    elif depth < 3 and r < 0.4:
        s["type"] = "array"
        if rng.random() < 0.85:
            s["items"] = random_schema(rng, depth + 1)
    elif depth < 3 and r < 0.5:
        s[rng.choice(["oneOf", "oneOf", "anyOf", "allOf"])] = [
            random_schema(rng, depth + 1) for _ in range(rng.randint(0, 3))]
    elif r < 0.6:
        s["type"] = rng.sample(SCALARS[:5] + ["array", "object"], rng.randint(0, 3))
    elif r < 0.7:
        s["enum"] = rng.choice([["a", "b"], [1, 2.5], ["x", 1, None], [], ["q\"", "日本"]])
        if rng.random() < 0.5:
            s["type"] = rng.choice(["string", "integer"])
    elif r < 0.95:
        s["type"] = rng.choice(SCALARS)
    for key, p in (("description", 0.35), ("title", 0.1), ("default", 0.15), ("nullable", 0.1),
                   ("examples", 0.06), ("format", 0.05)):
        if rng.random() < p:
            s[key] = {"description": lambda: rng.choice(TEXTS + DESCRIPTIONS + [5]),
                      "title": lambda: rng.choice(["Title", "", None]),
                      "default": lambda: rng.choice(DEFAULTS),
                      "nullable": lambda: rng.choice([True, False, "yes"]),
                      "examples": lambda: rng.choice([["e1", "e\n2"], [1, "x"], []]),
                      "format": lambda: "date-time"}[key]()
    items = list(s.items())
    rng.shuffle(items)  # properties are rendered in document order, whatever the key order
    return dict(items)


def maybe_parts(rng, text):
    """`text` as a string, or split into an array of text content parts."""
    if rng.random() < 0.75:
        return text
    cuts = sorted(rng.randint(0, len(text)) for _ in range(rng.randint(0, 2)))
    return [{"type": "text", "text": text[a:b]} for a, b in zip([0] + cuts, cuts + [len(text)])]


def random_tools(rng):
    names = rng.sample(TOOL_NAMES, rng.randint(1, 3))
    tools = []
    for name in names:
        fn = {"name": name}
        d = rng.choice(DESCRIPTIONS + [None])
        if d is not None:
            fn["description"] = d
        schema = rng.choice(SCHEMAS) if rng.random() < 0.5 else random_schema(rng, obj=rng.random() < 0.9)
        if schema is not None:
            fn["parameters"] = json.loads(json.dumps(schema))
        tools.append({"type": "function", "function": fn})
    return tools


def random_turn(rng, tools, msgs, next_id):
    """Appends one user turn and maybe the assistant's answer (final or a tool loop)."""
    msgs.append({"role": "user", "content": maybe_parts(rng, rng.choice(TEXTS))})
    r = rng.random()
    if r < 0.2:
        return next_id
    thinking = {}
    if rng.random() < 0.6:
        thinking = rng.choice([{"reasoning_content": rng.choice(TEXTS)}, {"reasoning": rng.choice(TEXTS)},
                               {"reasoning_content": None, "reasoning": rng.choice(TEXTS)}])
    if tools and r < 0.6:
        for _ in range(rng.randint(1, 2)):  # one or two rounds of the tool loop
            calls = []
            for _ in range(rng.randint(1, 3)):
                next_id += 1
                args = rng.choice(['{"q": "x"}', '{}', '{"city": "Zürich", "n": 3}', '{"a": [1, 2]}', "",
                                   {"city": "Zürich 😀", "n": [1, 2.5, None, True], "o": {}}])
                calls.append({"id": f"call_{next_id}", "type": "function",
                              "function": {"name": rng.choice(tools)["function"]["name"], "arguments": args}})
            content = rng.choice([None, None, "Let me check that.", "", [{"type": "text", "text": "Checking."}]])
            msgs.append({"role": "assistant", "content": content, "tool_calls": calls, **thinking})
            for c in calls:
                if rng.random() < 0.9:
                    result = {"role": "tool", "content": maybe_parts(rng, rng.choice(TEXTS))}
                    result.update(rng.choice([{"tool_call_id": c["id"]}, {"name": c["function"]["name"]},
                                              {"tool_call_id": c["id"], "name": c["function"]["name"]}]))
                    msgs.append(result)
        if rng.random() < 0.5:
            msgs.append({"role": "assistant", "content": rng.choice(TEXTS), **thinking})
    elif rng.random() < 0.15:  # reasoning only, or an empty tool_calls list
        msgs.append(rng.choice([{"role": "assistant", "reasoning_content": rng.choice(TEXTS)},
                                {"role": "assistant", "content": rng.choice(TEXTS), "tool_calls": []}]))
    else:
        msgs.append({"role": "assistant", "content": maybe_parts(rng, rng.choice(TEXTS)), **thinking})
    return next_id


def random_request(rng):
    req = {"messages": []}
    if rng.random() < 0.7:
        req["reasoning_effort"] = rng.choice(["low", "medium", "high"])
    elif rng.random() < 0.5:
        req["reasoning"] = {"effort": rng.choice(["low", "medium", "high"])}
    tools = random_tools(rng) if rng.random() < 0.6 else []
    if tools:
        req["tools"] = tools
        choice = rng.choice([None, "auto", "none", "required", "named"])
        if choice == "named":
            req["tool_choice"] = {"type": "function", "function": {"name": tools[0]["function"]["name"]}}
        elif choice is not None:
            req["tool_choice"] = choice
    for _ in range(rng.choice([0, 0, 1, 1, 2])):
        req["messages"].append({"role": rng.choice(["system", "developer"]),
                                "content": maybe_parts(rng, rng.choice(TEXTS))})
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


# ---------------------------------------------------------------------------------------------
# Tests
# ---------------------------------------------------------------------------------------------
def test_render_matches_openai_harmony(gossamer, tokenizer_json, harmony):
    oh, enc = harmony
    rng = random.Random(fresh_seed("render vs openai-harmony"))
    cases = fixture_requests() + [(f"random[{i}]", random_request(rng)) for i in range(250)]
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
