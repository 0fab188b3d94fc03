"""Harmony parsing: gossamer's streaming parser against openai-harmony's StreamableParser.

Assistant completions rendered by openai-harmony (tool-call headers in its order and in the
model's own) are fed to `gossamer apply-template --parse --jsonl` and to StreamableParser, whole
and cut off at a random token; channels, recipients and text must agree, and the streamed events
must concatenate to the non-streaming result.
"""
import json
import random

from conftest import fresh_seed
from harmony_util import TEXTS, TOOL_NAMES, run_jsonl


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
            args = rng.choice(['{"q": "Zürich 😀"}', '{}', '{"a": [1, 2]}', json.dumps({"s": rng.choice(TEXTS)})])
            m = (oh.Message.from_role_and_content(A, args).with_channel(rng.choice(["commentary"] * 4 + ["analysis"]))
                 .with_recipient("functions." + rng.choice(TOOL_NAMES)))
            msgs.append(m.with_content_type(ct) if ct else m)
    else:
        msgs.append(oh.Message.from_role_and_content(A, rng.choice(TEXTS)).with_channel("final"))
    return msgs


def model_order_call(enc, m, rng):
    """A tool call in the header order gpt-oss itself writes: channel first, then the recipient
    (`<|channel|>commentary to=functions.f <|constrain|>json`); openai-harmony renders it the
    other way round."""
    sp = {t: enc.encode(t, allowed_special="all")[0] for t in
          ("<|start|>", "<|channel|>", "<|constrain|>", "<|message|>", "<|call|>")}
    text = lambda t: enc.encode(t, disallowed_special=())  # ordinary text, as render() does
    toks = [sp["<|start|>"]] + text("assistant") + [sp["<|channel|>"]] + text(f"{m.channel} to={m.recipient}")
    if m.content_type == "<|constrain|>json":
        toks += text(" ") * (rng.random() < 0.8) + [sp["<|constrain|>"]] + text("json")
    elif m.content_type:
        toks += text(" " + m.content_type)
    return toks + [sp["<|message|>"]] + text(m.content[0].text) + [sp["<|call|>"]]


def completion_tokens(oh, enc, msgs, rng):
    toks = []
    for m in msgs:
        toks += model_order_call(enc, m, rng) if m.recipient and rng.random() < 0.5 else enc.render(m)
    start, assistant = toks[0], toks[1]
    assert enc.decode([start, assistant]) == "<|start|>assistant"
    toks = toks[2:]  # the prompt ends with <|start|>assistant
    end = toks.pop()  # <|end|> or <|call|>
    if msgs[-1].recipient is None:
        end = enc.encode("<|return|>", allowed_special="all")[0]
    return toks + [end]


def special(enc, name):
    return enc.encode(name, allowed_special="all")[0]


def header_cut_at(enc, toks):
    """Where the header a completion is cut off in starts (its <|start|>; 0 for the first message,
    whose <|start|>assistant is the prompt's), or None when it does not end inside a header."""
    start = max((i for i, t in enumerate(toks) if t == special(enc, "<|start|>")), default=0)
    return None if special(enc, "<|message|>") in toks[start:] else start


def reference_parse(oh, enc, toks):
    """(reasoning, content, [(name, arguments)], channels) by StreamableParser; None when it gives
    up. It yields no message for a header cut off by the budget: the messages before it count."""
    parser = oh.StreamableParser(enc, role=oh.Role.ASSISTANT)
    truncated = toks[-1] not in enc.stop_tokens_for_assistant_actions()
    try:
        for t in toks:
            parser.process(t)
        if truncated:
            parser.process_eos()  # truncated: the open message ends here
    except Exception:
        cut = header_cut_at(enc, toks) if truncated else None
        if cut is None:
            return None
        return reference_parse(oh, enc, toks[:cut]) if cut > 0 else ("", "", [], [])
    ref = parser.messages
    return ("".join(m.content[0].text for m in ref if m.channel == "analysis" and not m.recipient),
            "".join(m.content[0].text for m in ref if m.channel in ("final", "commentary") and not m.recipient),
            [(m.recipient[len("functions."):], m.content[0].text) for m in ref if m.recipient],
            [m.channel for m in ref])


def check_parse(oh, enc, toks, out):
    res = out["result"]
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
    assert [args.get(i, "") for i in range(len(res["tool_calls"]))] == [c["arguments"] for c in res["tool_calls"]]
    stops = enc.stop_tokens_for_assistant_actions()
    if not any(t in stops for t in toks):
        assert res["truncated"] and not res["stopped"] and res["finish"] == "length"
    ref = reference_parse(oh, enc, toks)
    if ref is None:
        return False
    reasoning, content, calls, channels = ref
    assert res["reasoning"] == reasoning
    assert res["content"] == content
    assert [(c["name"], c["arguments"]) for c in res["tool_calls"]] == calls
    if toks[-1] in stops:
        assert res["warnings"] == [], res["warnings"]
        assert res["stopped"] and not res["truncated"]
        assert res["finish"] == ("tool_calls" if calls else "stop")
        assert [e["channel"] for e in out["events"] if e["type"] == "message_end"] == channels
    return True


def test_parser_matches_streamable_parser(gossamer, tokenizer_json, harmony):
    """Whole completions, and the same cut off at a random token (the budget ran out)."""
    oh, enc = harmony
    rng = random.Random(fresh_seed("parser vs StreamableParser"))
    completions = [completion_tokens(oh, enc, msgs, rng) for msgs in
                   (random_completion(oh, rng) for _ in range(200))]
    completions += [c[:rng.randrange(1, len(c))] for c in completions]
    outs = run_jsonl(gossamer, tokenizer_json, completions, "--parse", "--seed", "7")
    checked = sum(check_parse(oh, enc, toks, out) for toks, out in zip(completions, outs))
    print(f"completions: {len(completions)} (half of them cut off), "
          f"cross-checked with StreamableParser: {checked}")
    assert checked > len(completions) // 2


def test_parser_budget_exhausted_in_reasoning(gossamer, tokenizer_json, harmony):
    oh, enc = harmony
    toks = enc.render(oh.Message.from_role_and_content(oh.Role.ASSISTANT, "Let me think about this at length")
                      .with_channel("analysis"))[2:-3]  # cut off: no <|end|>, no stop token
    out = run_jsonl(gossamer, tokenizer_json, [toks], "--parse")[0]["result"]
    assert out["truncated"] and out["reasoning_only"] and out["content"] == ""
    assert out["finish"] == "length"
    assert "Let me think about this" in out["reasoning"]
