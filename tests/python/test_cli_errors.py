"""Bad command lines and mismatched inputs end with a clear message and a non-zero exit, never an
abort, a crash or a server that cannot be stopped (cases from a robustness audit)."""
import json
import signal
import subprocess
import time

from conftest import fresh_seed, gossamer_bin
from server_util import free_port


def run(*args, input=None, timeout=120):
    p = subprocess.run([gossamer_bin(), *map(str, args)], input=input, capture_output=True,
                       timeout=timeout)
    return p.returncode, p.stdout.decode(errors="replace"), p.stderr.decode(errors="replace")


def test_tokenize_jsonl_invalid_utf8_line_is_an_error_line(tokenizer_json):
    rc, out, err = run("tokenize", "--tokenizer", tokenizer_json, "--jsonl",
                       input=b'\xff\xfe\n"ok"\n')
    assert rc == 1, err  # not an abort (134)
    first, second = [json.loads(ln) for ln in out.splitlines()]
    assert "line 1" in first["error"] and "not valid JSON" in first["error"]
    assert isinstance(second, list) and second


def test_serve_rejects_flags_that_cannot_work(tokenizer_json):
    for flags, words in [(["--block-size", "0"], "--block-size"),
                         (["--block-size", "1000000000"], "--block-size"),
                         (["--kv-blocks", "99999999999"], "--kv-blocks"),
                         (["--kv-cache-gib", "nan"], "finite"),
                         (["--request-timeout", "9300000000"], "--request-timeout"),
                         (["--shutdown-grace", "-1"], "--shutdown-grace")]:
        rc, _, err = run("serve", "--tokenizer", tokenizer_json, "--port", "0", *flags,
                         timeout=60)
        assert rc not in (0, -8, 134, 136) and rc > 0, (flags, rc, err)
        assert words in err, (flags, err)


def test_model_and_tokenizer_must_match(bases, tokenizer_json):
    """A 512-token model with the 200k-token gpt-oss tokenizer: every request would have failed
    ('prompt token 0 = 200006 is outside the vocabulary'); now serve refuses to start."""
    rc, _, err = run("serve", "--model", bases / "mx", "--tokenizer", tokenizer_json,
                     "--port", "0", timeout=60)
    assert rc == 1 and "beyond the model's vocab_size 512" in err, err
    rc, _, err = run("serve", "--model", bases / "mx", "--tokenizer", tokenizer_json,
                     "--port", "0", "--max-model-len", "999999999", timeout=60)
    assert rc != 0


def test_run_with_absurd_lengths_ends_with_a_message(bases):
    """-n near INT64_MAX overflowed (UB); it is now limited to 2^31 (10^9 on a small machine ends
    in main's "out of memory" message instead of an abort). Positions beyond
    max_position_embeddings stay allowed, as in transformers (the oracle tests use them)."""
    rc, _, err = run("run", "--model", bases / "mx", "--tokens", "1", "-n",
                     "9223372036854775807")
    assert rc != 0 and "--max-tokens" in err, err


def test_sigterm_during_startup_still_stops(tokenizer_json, tmp_path):
    """A signal before the listener is up used to be lost: the server then ran on, refusing work
    with 503 and ignoring further signals."""
    import random
    rng = random.Random(fresh_seed("sigterm during startup"))
    for _ in range(4):
        p = subprocess.Popen([gossamer_bin(), "serve", "--tokenizer", str(tokenizer_json),
                              "--port", str(free_port()), "--shutdown-grace", "0"],
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                             env={"GOSSAMER_CACHE": str(tmp_path), "PATH": "/usr/bin:/bin"})
        time.sleep(rng.uniform(0.0, 0.3))
        p.send_signal(signal.SIGTERM)
        try:
            rc = p.wait(timeout=30)
        except subprocess.TimeoutExpired:
            p.kill()
            raise AssertionError("serve ignored SIGTERM:\n" + p.stderr.read().decode())
        # (-SIGTERM: it came before serve blocked the signal, during process start-up)
        assert rc in (0, -signal.SIGTERM), p.stderr.read().decode()
