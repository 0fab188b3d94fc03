"""Structured output oracle: documents written by random walks through JsonConstraint's allowed
token sets must parse with Python's json and validate with jsonschema (Draft 2020-12).

The walks come from the C++ test JsonConstraint.RandomWalksWriteDocumentsThatFitTheSchema
(src/server/json_constraint_test.cpp), which appends {"case", "schema", "document"} lines to
$GOSSAMER_JSON_WALK_OUT/walks.jsonl. Neither json nor jsonschema shares code with gossamer.
"""
import json
import os
import pathlib
import subprocess

import jsonschema
import pytest

from conftest import REPO, gossamer_bin

# Keywords json_schema.h documents as accepted but not enforced: the oracle drops them, so it
# checks exactly the promised subset. ("nullable" is OpenAPI's: rewritten as anyOf [..., null].)
IGNORED = {"minLength", "maxLength", "pattern", "format", "minimum", "maximum",
           "exclusiveMinimum", "exclusiveMaximum", "multipleOf"}
SUBSCHEMA = {"items", "additionalProperties", "additionalItems", "not"}
SUBSCHEMA_LISTS = {"prefixItems", "anyOf", "oneOf", "allOf"}
SUBSCHEMA_MAPS = {"properties", "$defs", "definitions"}


def enforced(schema):
    """The schema without the ignored keywords, nullable rewritten."""
    if not isinstance(schema, dict):
        return schema
    out = {}
    for k, v in schema.items():
        if k in IGNORED or k == "nullable":
            continue
        if k in SUBSCHEMA:
            v = enforced(v)
        elif k in SUBSCHEMA_LISTS and isinstance(v, list):
            v = [enforced(s) for s in v]
        elif k in SUBSCHEMA_MAPS and isinstance(v, dict):
            v = {name: enforced(s) for name, s in v.items()}
        out[k] = v
    if schema.get("nullable") is True:
        defs = {k: out.pop(k) for k in ("$defs", "definitions") if k in out}
        out = {"anyOf": [out, {"type": "null"}], **defs}
    return out


def server_test_bin() -> str:
    env = os.environ.get("GOSSAMER_SERVER_TEST_BIN")
    if env:
        return env
    beside = pathlib.Path(gossamer_bin()).parent / "src" / "server" / "gossamer_server_test"
    return str(beside if beside.exists() else REPO / "build" / "src" / "server" /
               "gossamer_server_test")


def strict_loads(text):
    def no_constant(name):  # NaN / Infinity are not JSON
        raise ValueError(f"not JSON: {name}")
    return json.loads(text, parse_constant=no_constant)


@pytest.fixture(scope="module")
def walks(tmp_path_factory):
    binary = server_test_bin()
    if not os.path.exists(binary):
        pytest.fail(f"gossamer_server_test not found at {binary}; build first (scripts/setup.sh)")
    out = tmp_path_factory.mktemp("walks")
    p = subprocess.run(
        [binary, "--gtest_filter=JsonConstraint.RandomWalksWriteDocumentsThatFitTheSchema",
         "--gtest_repeat=2"],
        env={**os.environ, "GOSSAMER_JSON_WALK_OUT": str(out)}, capture_output=True, timeout=600)
    assert p.returncode == 0, p.stdout.decode(errors="replace")[-4000:]
    # Split on "\n" only: str.splitlines() also breaks at U+2028 / U+0085, which a walk may
    # write inside a JSON string (the "unreproduced fixture error" of session 16).
    lines = (out / "walks.jsonl").read_text(encoding="utf-8").split("\n")
    return [json.loads(line) for line in lines if line]


def test_walk_documents_validate(walks):
    cases = {w["case"] for w in walks}
    assert len(cases) >= 10, cases  # every schema of the C++ test wrote documents
    assert len(walks) >= 100
    failures = []
    for w in walks:
        schema = enforced(w["schema"])
        jsonschema.Draft202012Validator.check_schema(schema)
        try:
            doc = strict_loads(w["document"])
        except ValueError as e:
            failures.append(f"{w['case']}: does not parse ({e}): {w['document']!r}")
            continue
        errors = list(jsonschema.Draft202012Validator(schema).iter_errors(doc))
        if errors:
            failures.append(f"{w['case']}: {errors[0].message}: {w['document']!r}")
    assert not failures, "\n".join(failures[:20])


def test_walk_documents_are_compact_enough(walks):
    # Whitespace between tokens is capped at 8 bytes in a row and none follows the value.
    for w in walks:
        doc = w["document"]
        assert doc == doc.rstrip(), repr(doc)
        run = longest = 0
        in_string = escaped = False
        for ch in doc:
            if in_string:
                in_string = escaped or ch != '"'
                escaped = not escaped and ch == "\\"
                continue
            in_string = ch == '"'
            run = run + 1 if ch in " \n\t\r" else 0
            longest = max(longest, run)
        assert longest <= 8, repr(doc)


def test_enforced_rewrites_nullable_and_drops_annotations():
    s = enforced({"type": "object", "properties": {"minLength": {"type": "string", "minLength": 3,
                                                                 "nullable": True}}})
    assert s == {"type": "object", "properties": {"minLength": {
        "anyOf": [{"type": "string"}, {"type": "null"}]}}}
