"""The server's /v1/completions through the openai SDK: text vs token ids vs streaming, stop
strings, logit_bias, echo, prompt logprobs (scoring with max_tokens 0) equal to the decode path's.
"""
import openai
import pytest

from server_util import MODEL, MSGS, assert_openai_error, keyed_server_fixtures, raw

server, client = keyed_server_fixtures()


def test_completions_text_ids_stream_and_stop(client, tokenizer_json):
    from tokenizers import Tokenizer
    tok = Tokenizer.from_file(str(tokenizer_json))
    r = client.completions.create(model=MODEL, prompt="The quick brown fox", max_tokens=12,
                                  temperature=0, logprobs=2)
    c = r.choices[0]
    assert r.object == "text_completion" and c.finish_reason in ("stop", "length")
    assert r.usage.prompt_tokens == len(tok.encode("The quick brown fox").ids)
    assert len(c.logprobs.tokens) == r.usage.completion_tokens
    ids = tok.encode("The quick brown fox").ids
    r2 = client.completions.create(model=MODEL, prompt=ids, max_tokens=12, temperature=0)
    assert r2.choices[0].text == c.text
    chunks = list(client.completions.create(model=MODEL, prompt="The quick brown fox",
                                            max_tokens=12, temperature=0, stream=True))
    assert "".join(ch.choices[0].text for ch in chunks if ch.choices) == c.text
    # A stop string cuts the text right before it.
    text = c.text
    if len(text) >= 4:
        stop = text[len(text) // 2:len(text) // 2 + 2]
        r3 = client.completions.create(model=MODEL, prompt="The quick brown fox", max_tokens=12,
                                       temperature=0, stop=[stop])
        assert r3.choices[0].text == text[:text.find(stop)]
        assert r3.choices[0].finish_reason == "stop"


def test_logit_bias(client, tokenizer_json):
    from tokenizers import Tokenizer
    tok = Tokenizer.from_file(str(tokenizer_json))
    (banana,) = tok.encode(" banana").ids
    base = client.completions.create(model=MODEL, prompt="The quick brown fox", max_tokens=6,
                                     temperature=0)
    # +100 outweighs the demo model's logits: every token is the biased one, greedy or sampled.
    for temperature in (0, 1):
        r = client.completions.create(model=MODEL, prompt="The quick brown fox", max_tokens=6,
                                      temperature=temperature, logprobs=1,
                                      logit_bias={str(banana): 100})
        assert r.choices[0].text == tok.decode([banana] * 6), r.choices[0].text
        assert r.choices[0].logprobs.tokens == [" banana"] * 6
    # A bias on ids the greedy text never uses leaves it unchanged; a ban changes it.
    unused = [i for i in range(1000, 1010) if tok.decode([i]) not in base.choices[0].text]
    r = client.completions.create(model=MODEL, prompt="The quick brown fox", max_tokens=6,
                                  temperature=0, logit_bias={str(i): -100 for i in unused})
    assert r.choices[0].text == base.choices[0].text
    first = client.completions.create(model=MODEL, prompt="The quick brown fox", max_tokens=1,
                                      temperature=0, logprobs=0)
    s0 = first.choices[0].logprobs.tokens[0]
    ids0 = tok.encode(s0).ids
    if len(ids0) == 1 and tok.decode(ids0) == s0:
        r = client.completions.create(model=MODEL, prompt="The quick brown fox", max_tokens=1,
                                      temperature=0, logprobs=0,
                                      logit_bias={str(ids0[0]): -100})
        assert r.choices[0].logprobs.tokens[0] != s0
    # Chat takes the same field; ids outside the vocabulary and bad values are 400s.
    chat = client.chat.completions.create(model=MODEL, messages=MSGS, max_tokens=3,
                                          temperature=0, logit_bias={str(banana): 100})
    assert chat.usage.completion_tokens == 3
    for bias in ({"300000": 1}, {"5": 101}, {"five": 1}):
        with pytest.raises(openai.BadRequestError) as e:
            client.completions.create(model=MODEL, prompt="x", max_tokens=2, logit_bias=bias)
        assert "logit_bias" in str(e.value)


def _byte_level_tokenizer(tokenizer_json):
    """The tokenizers library's tokenizer and an id -> bytes map (GPT-2 byte-level alphabet)."""
    from tokenizers import Tokenizer
    tok = Tokenizer.from_file(str(tokenizer_json))
    bs = (list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1))
          + list(range(ord("®"), ord("ÿ") + 1)))
    cs, n = bs[:], 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    inv = {chr(c): b for b, c in zip(bs, cs)}

    def token_bytes(i):
        return bytes(inv[ch] for ch in tok.id_to_token(i))

    return tok, token_bytes


def test_completions_echo_returns_prompt_then_completion(client, tokenizer_json):
    tok, _ = _byte_level_tokenizer(tokenizer_json)
    prompt = "The quick brown fox"
    ids = tok.encode("héllo wörld, 1234 ✓").ids
    for p, echoed in ((prompt, prompt), (ids, tok.decode(ids))):
        base = client.completions.create(model=MODEL, prompt=p, max_tokens=6, temperature=0)
        r = client.completions.create(model=MODEL, prompt=p, max_tokens=6, temperature=0,
                                      echo=True)
        assert r.choices[0].text == echoed + base.choices[0].text
        assert r.usage.completion_tokens == base.usage.completion_tokens
        assert r.usage.prompt_tokens == base.usage.prompt_tokens
        chunks = list(client.completions.create(model=MODEL, prompt=p, max_tokens=6,
                                                temperature=0, echo=True, stream=True))
        texts = [ch.choices[0].text for ch in chunks if ch.choices]
        assert texts[0] == echoed  # the prompt comes first, on its own
        assert "".join(texts) == r.choices[0].text
    # A batch: every choice echoes its own prompt.
    r = client.completions.create(model=MODEL, prompt=[ids, ids[:3]], max_tokens=2,
                                  temperature=0, echo=True)
    assert r.choices[0].text.startswith(tok.decode(ids))
    assert r.choices[1].text.startswith(tok.decode(ids[:3]))


def test_completions_echo_prompt_logprobs_score_only(client, tokenizer_json):
    import math
    tok, token_bytes = _byte_level_tokenizer(tokenizer_json)
    prompt = "Scoring: the cat sat on the mat. Ünïcödé ✓ 12345"
    ids = tok.encode(prompt).ids  # independent oracle for the token list
    r = client.completions.create(model=MODEL, prompt=prompt, max_tokens=0, echo=True,
                                  logprobs=2)
    c = r.choices[0]
    assert c.text == prompt and c.finish_reason == "length"
    assert r.usage.completion_tokens == 0 and r.usage.prompt_tokens == len(ids)
    lp = c.logprobs
    assert len(lp.tokens) == len(lp.token_logprobs) == len(lp.top_logprobs) == len(ids)
    for i, s in zip(ids, lp.tokens):
        b = token_bytes(i)
        try:
            assert s == b.decode("utf-8")
        except UnicodeDecodeError:
            pass  # a token holding part of a character: its string has replacement chars
    assert lp.token_logprobs[0] is None and lp.top_logprobs[0] is None
    for v, top in zip(lp.token_logprobs[1:], lp.top_logprobs[1:]):
        assert math.isfinite(v) and v <= 0
        vals = list(top.values())
        assert 1 <= len(top) <= 2 and all(math.isfinite(x) and x <= 0 for x in vals)
        assert vals == sorted(vals, reverse=True) and v <= vals[0] + 1e-5
    offsets = [0]
    for i in ids[:-1]:
        offsets.append(offsets[-1] + len(token_bytes(i)))
    assert lp.text_offset == offsets
    assert offsets[-1] + len(token_bytes(ids[-1])) == len(prompt.encode())
    # Streaming: the prompt and all its logprobs first, then the end.
    chunks = list(client.completions.create(model=MODEL, prompt=prompt, max_tokens=0,
                                            echo=True, logprobs=2, stream=True))
    chunks = [ch for ch in chunks if ch.choices]
    assert chunks[0].choices[0].text == prompt
    assert chunks[0].choices[0].logprobs.token_logprobs == lp.token_logprobs
    assert chunks[-1].choices[0].finish_reason == "length"
    assert "".join(ch.choices[0].text for ch in chunks) == prompt
    # Without logprobs: the echoed prompt only.
    r = client.completions.create(model=MODEL, prompt=ids, max_tokens=0, echo=True)
    assert r.choices[0].text == tok.decode(ids) and r.choices[0].logprobs is None


def test_completions_prompt_scoring_matches_generation(client, tokenizer_json):
    """Decode-path logprobs of a greedy continuation == prompt-path logprobs of the same ids."""
    tok, token_bytes = _byte_level_tokenizer(tokenizer_json)
    # The generated ids are recovered from their token strings: pick a prompt whose greedy
    # continuation holds only tokens whose bytes are whole UTF-8 (one id per string).
    by_string = {}
    for i in range(tok.get_vocab_size()):
        try:
            by_string.setdefault(token_bytes(i).decode("utf-8"), i)
        except (UnicodeDecodeError, KeyError, TypeError):
            pass
    for seed_text in ("Once upon a time", "In the beginning", "Dear diary,", "1, 2, 3,",
                      "The weather today", "Hello there", "Numbers:", "A B C D"):
        ids = tok.encode(seed_text).ids
        g = client.completions.create(model=MODEL, prompt=ids, max_tokens=8, temperature=0,
                                      logprobs=1, extra_body={"ignore_eos": True})
        glp = g.choices[0].logprobs
        gen = [by_string.get(s) for s in glp.tokens]
        if len(gen) == 8 and None not in gen and all(token_bytes(i).decode("utf-8") == s
                                                     for i, s in zip(gen, glp.tokens)):
            break
    else:
        pytest.fail("no greedy continuation made only of whole-character tokens")
    s = client.completions.create(model=MODEL, prompt=ids + gen, max_tokens=0, echo=True,
                                  logprobs=1)
    slp = s.choices[0].logprobs
    assert slp.tokens[len(ids):] == glp.tokens
    for j in range(8):
        got, want = slp.token_logprobs[len(ids) + j], glp.token_logprobs[j]
        assert abs(got - want) <= 1e-3 * max(abs(want), 1e-2), (j, got, want)
        # greedy: the scored position's most likely token is the generated one
        assert list(slp.top_logprobs[len(ids) + j]) == [glp.tokens[j]], j


def test_completions_max_tokens_zero_needs_echo(server, client):
    for body in ({"prompt": "x", "max_tokens": 0}, {"prompt": "x", "max_tokens": 0, "echo": False}):
        e = assert_openai_error(raw(server, dict(body, model=MODEL), path="/v1/completions"), 400)
        assert e["param"] == "max_tokens" and "max_tokens" in e["message"], e
        assert "echo" in e["message"], e
    e = assert_openai_error(raw(server, {"model": MODEL, "messages": MSGS, "max_tokens": 0}), 400)
    assert e["param"] == "max_tokens"
    e = assert_openai_error(raw(server, {"model": MODEL, "prompt": "x", "echo": "yes"},
                                path="/v1/completions"), 400)
    assert e["param"] == "echo"


