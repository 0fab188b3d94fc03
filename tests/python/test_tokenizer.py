"""gossamer's tokenizer against HF `tokenizers` and `tiktoken` (independent oracles).

All texts go through ONE `gossamer tokenize --jsonl` process per test. The corpus is the files
in tests/data/tokenizer plus variants and seeded random text generated here (seed printed).
"""
import json
import pathlib
import random

import pytest

from conftest import fresh_seed

DATA = pathlib.Path(__file__).resolve().parents[1] / "data" / "tokenizer"


# ---- oracles -----------------------------------------------------------------------------
def _byte_level_decoder():
    """Inverse of GPT-2's bytes->unicode table, written from its definition."""
    printable = list(range(0x21, 0x7F)) + list(range(0xA1, 0xAD)) + list(range(0xAE, 0x100))
    table, extra = {}, 0
    for b in range(256):
        if b in printable:
            table[chr(b)] = b
        else:
            table[chr(256 + extra)] = b
            extra += 1
    return lambda s: bytes(table[c] for c in s)


@pytest.fixture(scope="module")
def oracles(tokenizer_json):
    import tiktoken
    from tokenizers import Tokenizer

    hf = Tokenizer.from_file(str(tokenizer_json))
    hf_plain = Tokenizer.from_file(str(tokenizer_json))
    hf_plain.encode_special_tokens = True  # special-token text encoded as ordinary text
    spec = json.loads(tokenizer_json.read_text(encoding="utf-8"))
    to_bytes = _byte_level_decoder()
    ranks = {to_bytes(tok): i for tok, i in spec["model"]["vocab"].items()}
    pretok = spec["pre_tokenizer"]["pretokenizers"][0]
    assert pretok["type"] == "Split"
    special = {t["content"]: t["id"] for t in spec["added_tokens"]}
    tt = tiktoken.Encoding("o200k_from_json", pat_str=pretok["pattern"]["Regex"],
                           mergeable_ranks=ranks, special_tokens=special)
    return {"hf": hf, "hf_plain": hf_plain, "tt": tt, "ranks": ranks, "special": special}


def _encode_many(gossamer, tokenizer_json, items, special=False):
    """items: str (text) or bytes (sent as hex). Returns a list of id lists."""
    lines = []
    for it in items:
        if isinstance(it, bytes):
            lines.append(json.dumps({"hex": it.hex()}))
        else:
            lines.append(json.dumps(it))
    args = ["tokenize", "--tokenizer", tokenizer_json, "--jsonl"] + (["--special"] if special else [])
    out = gossamer(*args, input=("\n".join(lines) + "\n").encode()).stdout.decode()
    rows = [json.loads(l) for l in out.splitlines()]
    assert len(rows) == len(items)
    return rows


def _decode_many(gossamer, tokenizer_json, id_lists, stream=False):
    args = ["detokenize", "--tokenizer", tokenizer_json, "--jsonl"] + (["--stream"] if stream else [])
    inp = "".join(json.dumps(ids) + "\n" for ids in id_lists).encode()
    out = gossamer(*args, input=inp).stdout.decode()
    rows = [json.loads(l) for l in out.splitlines()]
    assert len(rows) == len(id_lists)
    return [bytes.fromhex(r["hex"]) for r in rows]


# ---- corpus --------------------------------------------------------------------------------
def _corpus_texts():
    texts = []
    for name in ("multilingual.txt", "code.txt", "emoji.txt"):
        raw = (DATA / name).read_bytes().decode("utf-8")
        texts.append(raw)  # whole file
        texts.extend(raw.split("\n"))  # each line
        texts.extend(p for p in raw.split("\n\n") if p)  # paragraphs
    with open(DATA / "edge_cases.jsonl", encoding="utf-8") as f:
        edge = [json.loads(l) for l in f if l.strip()]
    texts.extend(edge)
    texts.append("".join(edge))
    base = list(texts)
    for t in base:  # case and whitespace variants exercise contractions and \s rules
        texts.extend([t.upper(), t.lower(), t.swapcase(), t.replace(" ", "  "),
                      t.replace("\n", "\r\n"), t.replace(" ", "\t"), " " + t + " \n"])
    return [t for t in texts if t]


_POOLS = [
    (0x20, 0x7E), (0x09, 0x0D), (0x00, 0x1F), (0xA0, 0x24F), (0x300, 0x36F), (0x370, 0x3FF),
    (0x400, 0x4FF), (0x590, 0x6FF), (0x900, 0x97F), (0xE00, 0xE7F), (0x1100, 0x11FF),
    (0x2000, 0x206F), (0x2070, 0x2BFF), (0x3000, 0x30FF), (0x4E00, 0x9FFF), (0xAC00, 0xD7A3),
    (0xFE00, 0xFFFD), (0x1D400, 0x1D7FF), (0x1F300, 0x1FAFF), (0xE0000, 0xE007F),
    (0x10000, 0x10FFFF),
]


def _random_text(rng, n):
    out = []
    while len(out) < n:
        r = rng.random()
        if r < 0.3:
            out.append(rng.choice([" ", "  ", "\n", "\r\n", "\t", "'s", "'LL", "'Ve", "123", "4567"]))
        elif r < 0.55:
            out.append("".join(rng.choice("abcdefghijklmnopqrstuvwxyzABCDEFGHIJ") for _ in range(rng.randint(1, 8))))
        else:
            lo, hi = rng.choice(_POOLS)
            cp = rng.randint(lo, hi)
            if 0xD800 <= cp <= 0xDFFF:
                continue
            out.append(chr(cp))
    return "".join(out)


def _report(name, texts, got, want):
    nbytes = sum(len(t.encode("utf-8", "surrogatepass")) if isinstance(t, str) else len(t) for t in texts)
    ntok = sum(len(w) for w in want)
    match = sum(g == w for g, w in zip(got, want))
    print(f"\n{name}: {len(texts)} pieces, {nbytes} bytes, {ntok} tokens, "
          f"match {match}/{len(texts)} = {100.0 * match / len(texts):.3f}%")
    bad = [(t, g, w) for t, g, w in zip(texts, got, want) if g != w]
    for t, g, w in bad[:3]:
        print(f"  MISMATCH {t!r:.200}\n    got  {g[:40]}\n    want {w[:40]}")
    return len(bad)


# ---- tests ---------------------------------------------------------------------------------
@pytest.mark.parametrize("special", [False, True])
def test_corpus_matches_hf_and_tiktoken(gossamer, tokenizer_json, oracles, special):
    texts = _corpus_texts()
    got = _encode_many(gossamer, tokenizer_json, texts, special=special)
    hf = oracles["hf"] if special else oracles["hf_plain"]
    want_hf = [e.ids for e in hf.encode_batch(texts, add_special_tokens=False)]
    tt = oracles["tt"]
    want_tt = [tt.encode(t, allowed_special="all") if special else tt.encode_ordinary(t) for t in texts]
    assert _report("vs HF tokenizers", texts, got, want_hf) == 0
    assert _report("vs tiktoken", texts, got, want_tt) == 0


def test_random_unicode_matches_oracles(gossamer, tokenizer_json, oracles):
    rng = random.Random(fresh_seed("random unicode vs oracles"))
    texts = [_random_text(rng, rng.randint(1, 300)) for _ in range(3000)]
    got = _encode_many(gossamer, tokenizer_json, texts)
    want_hf = [e.ids for e in oracles["hf_plain"].encode_batch(texts, add_special_tokens=False)]
    want_tt = [oracles["tt"].encode_ordinary(t) for t in texts]
    assert _report("random vs HF tokenizers", texts, got, want_hf) == 0
    assert _report("random vs tiktoken", texts, got, want_tt) == 0


def test_special_tokens(gossamer, tokenizer_json, oracles):
    sp = list(oracles["special"])
    texts = ["<|start|>user<|message|>hi<|end|>", "x<|channel|>analysis", "<|return|><|call|>",
             "<|start|", "<|<|end|>|>", "a <|endoftext|> b", "<|constrain|>json<|message|>{}"]
    rng = random.Random(1234)
    for _ in range(200):
        texts.append("".join(rng.choice(sp + ["a", " ", "<|", "|>", "\n", "é"]) for _ in range(12)))
    for special in (False, True):
        got = _encode_many(gossamer, tokenizer_json, texts, special=special)
        hf = oracles["hf"] if special else oracles["hf_plain"]
        want = [e.ids for e in hf.encode_batch(texts, add_special_tokens=False)]
        assert _report(f"special={special}", texts, got, want) == 0


def test_decode_matches_oracles(gossamer, tokenizer_json, oracles):
    rng = random.Random(fresh_seed("decode vs oracles"))
    n_model = len(oracles["ranks"])
    specials = list(oracles["special"].values())
    id_lists = []
    for _ in range(2000):
        ids = [rng.randrange(n_model) if rng.random() < 0.97 else rng.choice(specials)
               for _ in range(rng.randint(0, 30))]
        id_lists.append(ids)
    got = _decode_many(gossamer, tokenizer_json, id_lists)
    tt = oracles["tt"]
    want = [tt.decode_bytes(ids) for ids in id_lists]
    assert got == want
    # HF decodes lossily to str; the lossy view of our bytes must agree.
    hf = [oracles["hf"].decode(ids, skip_special_tokens=False) for ids in id_lists]
    assert [g.decode("utf-8", "replace") for g in got] == hf
    # Streaming decoder: same text as Python's lossy decoding of the whole byte string.
    streamed = _decode_many(gossamer, tokenizer_json, id_lists, stream=True)
    assert [s.decode("utf-8") for s in streamed] == [w.decode("utf-8", "replace") for w in want]


def test_invalid_utf8_rule_and_round_trip(gossamer, tokenizer_json, oracles):
    """Documented rule: each byte not part of a well-formed character becomes its single-byte
    token; the valid runs between such bytes are encoded independently."""
    rng = random.Random(fresh_seed("invalid utf-8"))
    ranks, hf = oracles["ranks"], oracles["hf_plain"]
    samples = [b"\xff", b"abc\x80def", b"\xe2\x82", b"\xe2\x82abc", b"caf\xc3", b"\xc0\xaf",
               b"\xed\xa0\x80", b"\xf4\x90\x80\x80", b"  \xfe  x", b"it\xe2\x80s"]
    for _ in range(500):
        s = bytearray(_random_text(rng, rng.randint(1, 40)).encode())
        for _ in range(rng.randint(1, 4)):
            s.insert(rng.randint(0, len(s)), rng.randrange(256))
        samples.append(bytes(s))
    got = _encode_many(gossamer, tokenizer_json, samples)

    def oracle(b):
        ids, i = [], 0
        while i < len(b):
            j = i
            while j < len(b):  # longest valid prefix from i
                for n in (1, 2, 3, 4):
                    try:
                        b[j:j + n].decode("utf-8")
                        break
                    except UnicodeDecodeError:
                        n = 0
                if n == 0:
                    break
                j += n
            if j > i:
                ids += hf.encode(b[i:j].decode("utf-8"), add_special_tokens=False).ids
            if j < len(b):
                ids.append(ranks[b[j:j + 1]])
                j += 1
            i = j
        return ids

    want = [oracle(b) for b in samples]
    assert _report("invalid utf-8 rule", samples, got, want) == 0
    assert _decode_many(gossamer, tokenizer_json, got) == samples


def test_cli_plain_modes(gossamer, tokenizer_json, oracles):
    text = "Hello <|start|> world, it's 2024!\n"
    want = oracles["hf_plain"].encode(text).ids
    p = gossamer("tokenize", "--tokenizer", tokenizer_json, "--text", text)
    assert p.stdout.decode().strip() == ",".join(map(str, want))
    p = gossamer("tokenize", "--tokenizer", tokenizer_json, input=text.encode())
    assert p.stdout.decode().strip() == ",".join(map(str, want))
    want_sp = oracles["hf"].encode(text).ids
    p = gossamer("tokenize", "--tokenizer", tokenizer_json, "--special", "--text", text)
    assert p.stdout.decode().strip() == ",".join(map(str, want_sp))
    p = gossamer("detokenize", "--tokenizer", tokenizer_json, "--ids", ",".join(map(str, want_sp)))
    assert p.stdout.decode() == text
    p = gossamer("tokenize", "--model", tokenizer_json.parent, "--text", text)
    assert p.stdout.decode().strip() == ",".join(map(str, want))


def test_cli_errors(gossamer, tokenizer_json, tmp_path):
    p = gossamer("tokenize", "--tokenizer", tmp_path / "missing.json", "--text", "x", check=False)
    assert p.returncode != 0 and b"missing.json" in p.stderr
    bad = tmp_path / "bad.json"
    bad.write_text('{"model": {"type": "BPE", "vocab": {"a": 0}, "merges": []}, "pre_tokenizer": null}')
    p = gossamer("tokenize", "--tokenizer", bad, "--text", "x", check=False)
    assert p.returncode != 0 and b"ByteLevel" in p.stderr
    p = gossamer("detokenize", "--tokenizer", tokenizer_json, "--ids", "1,99999999", check=False)
    assert p.returncode != 0 and b"99999999" in p.stderr and b"position 1" in p.stderr
    p = gossamer("detokenize", "--tokenizer", tokenizer_json, "--ids", "1,x", check=False)
    assert p.returncode == 2 and b"offset 2" in p.stderr
    inp = b'"ok"\nnot json\n{"hex": "zz"}\n'
    p = gossamer("tokenize", "--tokenizer", tokenizer_json, "--jsonl", input=inp, check=False)
    rows = [json.loads(l) for l in p.stdout.decode().splitlines()]
    assert p.returncode == 1 and isinstance(rows[0], list)
    assert "line 2" in rows[1]["error"] and "line 3" in rows[2]["error"]
