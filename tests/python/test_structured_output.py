"""Structured output (`response_format`, strict / forced tool arguments) end to end against
`gossamer serve` with the demo model.

The demo model's weights are random, so it would never leave its analysis message by itself; a
logit_bias of +100 on <|end|> makes it end that message at once. From there the server's
JsonConstraint forces the final-channel header and holds the body to the schema, so whatever
the random model samples must be a document the schema accepts. The independent oracles are
Python's json module and the `jsonschema` package (Draft 2020-12).
"""
import json
import sys

import jsonschema
import openai
import pytest

from conftest import REPO
from test_server import KEY, MODEL, Server

sys.path.insert(0, str(REPO / "scripts"))
from api_smoke import END, SHORT  # noqa: E402  (the same steering as the GPU smoke test)

SCHEMAS = [
    {"type": "object",
     "properties": {"fruits": {"type": "array", "items": {"enum": ["apple", "pear", "kiwi"]},
                               "minItems": 1, "maxItems": 3},
                    "count": {"type": "integer"},
                    "note": {"anyOf": [{"type": "string"}, {"type": "null"}]}},
     "required": ["fruits", "count"], "additionalProperties": False},
    {"type": "object",
     "properties": {"name": {"type": "string"}, "ok": {"type": "boolean"},
                    "score": {"type": "number"},
                    "tags": {"type": "array", "items": {"type": "string"}, "maxItems": 2},
                    "child": {"$ref": "#/$defs/node"}},
     "required": ["name", "ok"], "additionalProperties": False,
     "$defs": {"node": {"type": "object", "properties": {"v": {"type": "integer"}},
                        "required": ["v"], "additionalProperties": False}}},
    {"type": "array", "items": {"type": "integer"}, "minItems": 2, "maxItems": 4},
]


@pytest.fixture(scope="module")
def client(tmp_path_factory, tokenizer_json):
    s = Server(tmp_path_factory.mktemp("cache"), tokenizer_json, "--api-key", KEY,
               "--max-model-len", "2048")
    yield openai.OpenAI(base_url=s.base + "/v1", api_key=KEY, max_retries=0)
    assert s.stop() == 0, s.stderr()


def ask(client, fmt, seed, **kw):
    return client.chat.completions.create(
        model=MODEL, messages=[{"role": "user", "content": "Reply in JSON."}], max_tokens=200,
        temperature=1, seed=seed, logit_bias={str(END): 100, **SHORT}, response_format=fmt,
        **kw)


@pytest.mark.parametrize("schema", SCHEMAS)
def test_json_schema_output_validates(client, schema):
    fmt = {"type": "json_schema", "json_schema": {"name": "answer", "schema": schema}}
    done = 0
    for seed in range(6):
        r = ask(client, fmt, seed)
        c = r.choices[0]
        if c.finish_reason == "length":  # a random model may write a long string
            continue
        assert c.finish_reason == "stop"
        jsonschema.validate(json.loads(c.message.content), schema)
        done += 1
    assert done >= 4, "most random documents should finish within 200 tokens"


def test_json_object_and_streaming(client):
    fmt = {"type": "json_object"}
    r = ask(client, fmt, 7)
    if r.choices[0].finish_reason == "stop":
        assert isinstance(json.loads(r.choices[0].message.content), dict)
    chunks = list(ask(client, fmt, 7, stream=True))
    text = "".join(ch.choices[0].delta.content or "" for ch in chunks if ch.choices)
    assert text == r.choices[0].message.content


def test_responses_text_format(client):
    schema = SCHEMAS[2]
    r = client.responses.create(
        model=MODEL, input="Reply in JSON.", max_output_tokens=200, temperature=1,
        extra_body={"logit_bias": {str(END): 100, **SHORT}, "seed": 1},
        text={"format": {"type": "json_schema", "name": "nums", "schema": schema}})
    assert r.text.format.type == "json_schema"
    assert r.status == "completed", r
    jsonschema.validate(json.loads(r.output_text), schema)


def test_bad_schemas_are_400s(client):
    for schema, word in [({"type": "object", "not": {"type": "null"}}, "not"),
                         ({"type": "strin"}, "strin"),
                         ({"type": "object", "properties": {"a": {"allOf": [{}, {}]}}},
                          "/properties/a")]:
        with pytest.raises(openai.BadRequestError) as e:
            ask(client, {"type": "json_schema", "json_schema": {"name": "x", "schema": schema}}, 0)
        assert word in str(e.value) and "response_format" in str(e.value)
    with pytest.raises(openai.BadRequestError) as e:
        ask(client, {"type": "yaml"}, 0)
    assert "response_format.type" in str(e.value)


def tools_for(schemas, strict):
    return [{"type": "function", "function": {"name": f"tool_{i}", "parameters": s,
                                              "strict": strict}}
            for i, s in enumerate(schemas)]


@pytest.mark.parametrize("strict", [True, False])
def test_forced_tool_arguments_validate(client, strict):
    """A forced call (named, or required with several tools) writes arguments its schema
    accepts, whether or not the tool is strict."""
    objects = [SCHEMAS[0], SCHEMAS[1]]
    tools = tools_for(objects, strict)
    done = 0
    for seed in range(8):
        choice = "required" if seed % 2 else {"type": "function", "function": {"name": "tool_1"}}
        r = ask(client, None, seed, tools=tools, tool_choice=choice)
        c = r.choices[0]
        call = c.message.tool_calls[0]
        if c.finish_reason == "length":
            continue
        assert c.finish_reason == "tool_calls", c
        i = int(call.function.name.removeprefix("tool_"))
        jsonschema.validate(json.loads(call.function.arguments), objects[i])
        done += 1
    assert done >= 5, "most random calls should finish within 200 tokens"


def test_strict_tool_schema_errors_and_responses(client):
    bad = {"type": "object", "properties": {"a": {"not": {"type": "null"}}}}
    with pytest.raises(openai.BadRequestError) as e:
        ask(client, None, 0, tools=tools_for([SCHEMAS[0], bad], True))
    assert "tools[1].function.parameters" in str(e.value) and "/properties/a" in str(e.value)
    assert "response_format" not in str(e.value)  # a tool's schema, not the output's
    # Not strict: the same schema is accepted (a forced call falls back to any JSON object).
    r = ask(client, None, 0, tools=tools_for([bad], False), tool_choice="required")
    if r.choices[0].finish_reason == "tool_calls":
        assert isinstance(json.loads(r.choices[0].message.tool_calls[0].function.arguments), dict)
    # Responses API: strict function tools keep their flag.
    r = client.responses.create(
        model=MODEL, input="Call it.", max_output_tokens=200, temperature=1,
        tool_choice="required", extra_body={"logit_bias": SHORT, "seed": 3},
        tools=[{"type": "function", "name": "nums", "parameters": SCHEMAS[1], "strict": True}])
    fc = [o for o in r.output if o.type == "function_call"]
    assert fc and fc[0].name == "nums"
    if r.status == "completed":
        jsonschema.validate(json.loads(fc[0].arguments), SCHEMAS[1])
