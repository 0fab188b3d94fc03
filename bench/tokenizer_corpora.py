"""Benchmark corpora for bench/tokenizer_bench.py (deterministic: fixed sources, fixed seeds).

multilingual  the committed test corpus (tests/data/tokenizer) repeated (repetitive on purpose:
              the same input as earlier measurements)
code          Python standard-library sources (sorted file list), not repeated
english       English prose: docstrings of the Python standard library + pydoc topics
whitespace    generated: words with wide indentation, column padding, tabs, blank lines with
              spaces, CRLF, trailing blanks, a few Unicode spaces (seed 1)
cjk           generated: Chinese / Japanese / Korean sentences made of CJK tokens of the
              vocabulary (frequent ones more often), CJK punctuation, some digits (seed 2)
emoji         generated: English words mixed with emoji, skin tones, ZWJ sequences, flags,
              keycaps, variation selectors (seed 3)
"""
import ast
import json
import pathlib
import random
import re
import sysconfig

REPO = pathlib.Path(__file__).resolve().parents[1]
NAMES = ("multilingual", "code", "english", "whitespace", "cjk", "emoji")


def _stdlib_files():
    std = pathlib.Path(sysconfig.get_paths()["stdlib"])
    return sorted(p for p in std.rglob("*.py")
                  if "site-packages" not in p.parts and "test" not in p.parts and "tests" not in p.parts)


def _read(p):
    try:
        return p.read_text(encoding="utf-8")
    except (UnicodeDecodeError, OSError):
        return None


def multilingual(size):
    data = REPO / "tests" / "data" / "tokenizer"
    parts = [(data / n).read_text(encoding="utf-8") for n in ("multilingual.txt", "code.txt", "emoji.txt")]
    with open(data / "edge_cases.jsonl", encoding="utf-8") as f:
        parts.append("\n".join(json.loads(l) for l in f if l.strip()))
    unit = "\n\n".join(parts)
    return unit * (size // len(unit.encode()) + 1)


def code(size):
    out, n = [], 0
    for p in _stdlib_files():
        s = _read(p)
        if s is None:
            continue
        out.append(s)
        n += len(s.encode())
        if n >= size:
            break
    return "".join(out)


def english(size):
    import pydoc_data.topics
    out = list(pydoc_data.topics.topics.values())
    n = sum(len(s.encode()) for s in out)
    for p in _stdlib_files():
        if n >= size:
            break
        s = _read(p)
        try:
            tree = ast.parse(s) if s else None
        except SyntaxError:
            tree = None
        if tree is None:
            continue
        for node in ast.walk(tree):
            if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
                d = ast.get_docstring(node)
                if d:
                    out.append(d)
                    n += len(d.encode()) + 2
    return "\n\n".join(out)


def _words():
    import pydoc_data.topics
    text = " ".join(pydoc_data.topics.topics.values())
    return re.findall(r"[A-Za-z_][A-Za-z0-9_']*|\d+|[^\sA-Za-z0-9]", text)


def whitespace(size):
    rng, words = random.Random(1), _words()
    spaces = [" ", " ", " ", " ", "\t", "\u00a0", "\u3000", "\u2003"]
    lines, n = [], 0
    while n < size:
        r = rng.random()
        if r < 0.15:
            line = " " * rng.randrange(0, 40) if rng.random() < 0.5 else ""
        else:
            indent = ("\t" * rng.randrange(0, 6)) if rng.random() < 0.3 else " " * (4 * rng.randrange(0, 10))
            cells = []
            for _ in range(rng.randrange(1, 8)):
                w = rng.choice(words)
                pad = rng.randrange(1, 16)
                cells.append(w + (rng.choice(spaces) if rng.random() < 0.1 else " ") * pad)
            line = indent + "".join(cells)
            if rng.random() < 0.5:
                line = line.rstrip(" ")
        line += "\r\n" if rng.random() < 0.2 else "\n"
        lines.append(line)
        n += len(line.encode())
    return "".join(lines)


def _vocab_texts(tokenizer_json):
    spec = json.loads(pathlib.Path(tokenizer_json).read_text(encoding="utf-8"))
    printable = set(range(0x21, 0x7F)) | set(range(0xA1, 0xAD)) | set(range(0xAE, 0x100))
    table, extra = {}, 0
    for b in range(256):
        if b in printable:
            table[chr(b)] = b
        else:
            table[chr(256 + extra)] = b
            extra += 1
    out = []
    for t, i in spec["model"]["vocab"].items():
        try:
            out.append((i, bytes(table[c] for c in t).decode("utf-8")))
        except (KeyError, UnicodeDecodeError):
            pass
    out.sort()
    return [s for _, s in out]


def cjk(size, tokenizer_json):
    rng = random.Random(2)
    han = re.compile(r"^[\u4e00-\u9fff]+$")
    kana = re.compile(r"^[\u3040-\u30ff\u4e00-\u9fff]+$")
    hangul = re.compile(r"^ ?[\uac00-\ud7af]+$")
    texts = _vocab_texts(tokenizer_json)
    pools = [[t for t in texts if han.match(t)], [t for t in texts if kana.match(t) and not han.match(t)],
             [t for t in texts if hangul.match(t)]]
    punct = [["，", "。", "、", "；", "：", "？", "！", "（", "）", "「", "」"], ["、", "。", "「", "」", "・"],
             [". ", ", ", "? ", "! "]]

    def pick(pool):  # frequent (low id) tokens more often
        return pool[int(rng.expovariate(4.0 / len(pool))) % len(pool)]

    out, n = [], 0
    while n < size:
        lang = rng.randrange(3)
        sent = []
        for _ in range(rng.randrange(3, 25)):
            if lang == 2:
                sent.append(pick(pools[2]).strip() + (" " if rng.random() < 0.6 else ""))
            else:
                sent.append(pick(pools[lang]) if lang == 0 or rng.random() < 0.7 else pick(pools[0]))
            if rng.random() < 0.12:
                sent.append(rng.choice(punct[lang]))
            if rng.random() < 0.02:
                sent.append(str(rng.randrange(1, 3000)))
        s = "".join(sent).strip() + rng.choice(punct[lang][:2]).strip() + ("\n" if rng.random() < 0.2 else "")
        out.append(s)
        n += len(s.encode())
    return "".join(out)


def emoji(size):
    rng, words = random.Random(3), _words()
    base = list(range(0x1F300, 0x1F5FF)) + list(range(0x1F600, 0x1F64F)) + list(range(0x1F680, 0x1F6FF)) + \
        list(range(0x1F900, 0x1F9FF)) + list(range(0x2600, 0x27BF))
    tones = [chr(c) for c in range(0x1F3FB, 0x1F400)]
    people = ["\U0001F468", "\U0001F469", "\U0001F467", "\U0001F466", "\U0001F9D1"]

    def one():
        r = rng.random()
        if r < 0.55:
            e = chr(rng.choice(base))
            return e + ("\ufe0f" if rng.random() < 0.2 else "") + (rng.choice(tones) if rng.random() < 0.1 else "")
        if r < 0.7:
            return "\u200d".join(rng.choice(people) for _ in range(rng.randrange(2, 5)))
        if r < 0.85:
            return "".join(chr(0x1F1E6 + rng.randrange(26)) for _ in range(2))
        if r < 0.95:
            return rng.choice("0123456789#*") + "\ufe0f\u20e3"
        return "\U0001F3F4\u200d\u2620\ufe0f"

    out, n = [], 0
    while n < size:
        s = rng.choice(words) if rng.random() < 0.6 else "".join(one() for _ in range(rng.randrange(1, 4)))
        s += rng.choice([" ", " ", " ", "", "\n", "!! "])
        out.append(s)
        n += len(s.encode())
    return "".join(out)


def build(name, size, tokenizer_json):
    if name == "cjk":
        return cjk(size, tokenizer_json)
    return {"multilingual": multilingual, "code": code, "english": english, "whitespace": whitespace,
            "emoji": emoji}[name](size)
