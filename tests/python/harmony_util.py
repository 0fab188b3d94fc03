"""Helpers of the harmony tests (test_harmony_*.py): sample texts and tool names for random
conversations and completions, and one `gossamer apply-template --jsonl` run over a batch.

The openai-harmony oracle itself is the `harmony` fixture (conftest.py).
"""
import json

TEXTS = [
    "Hello!", "What is the capital of France?", "  spaces  around  ", "line one\nline two\n\n",
    "日本語のテキスト", "emoji 😀🎉 mix", "code: `def f(x):\n    return x**2`", "1234567890 3.14159",
    "Ünïcödé façade naïve", "<|start|>assistant<|message|>not special<|end|>", "tab\tseparated\tvalues",
    "", "x", "Ελληνικά και русский", "{\"json\": [1, 2, {\"a\": null}]}", "trailing newline\n",
    "a" * 300, "mixed 中文 and English, with punctuation!?", "\u200bzero width", "CRLF\r\nline",
    "separators\u2028\x85\x0c\x1e in JSONL", "👍🏽 e\u0301 ﬁ İ ǅ ½ ٣", " 'll 's\n\n\n   \t", "\x00nul\x7f",
]

TOOL_NAMES = ["get_weather", "search", "calc.add", "run-code", "lookup_ü", "a", "ToolWith$Dollar"]


def run_jsonl(gossamer, tokenizer_json, lines, *extra):
    p = gossamer("apply-template", "--tokenizer", tokenizer_json, *extra, "--jsonl",
                 input="".join(json.dumps(x, ensure_ascii=False) + "\n" for x in lines).encode())
    # split on "\n" only: str.splitlines() would also split inside strings holding U+2028, U+0085...
    outs = [json.loads(line) for line in p.stdout.decode().split("\n") if line]
    assert len(outs) == len(lines)
    return outs
