"""The server's edges, through the openai SDK and raw HTTP: error responses (400, 401, 404, 413,
429), tokenize/detokenize vs the tokenizers library, the listen backlog under a burst of
connects, a port in use.
"""
import concurrent.futures
import os
import select
import signal
import socket
import subprocess
import time

import openai
import pytest
import requests

from conftest import gossamer_bin
from server_util import (KEY, MODEL, MSGS, Server, assert_openai_error, keyed_server_fixtures,
                         raw)

server, client = keyed_server_fixtures()


def test_errors(server, client):
    base = {"model": MODEL, "messages": MSGS}
    assert_openai_error(raw(server, base, key=None), 401)
    assert_openai_error(raw(server, base, key="wrong"), 401)
    with pytest.raises(openai.AuthenticationError):
        openai.OpenAI(base_url=server.base + "/v1", api_key="nope",
                      max_retries=0).models.list()
    with pytest.raises(openai.NotFoundError):
        client.chat.completions.create(model="no-such-model", messages=MSGS)
    assert_openai_error(requests.get(server.base + "/v1/nothing-here",
                                     headers={"Authorization": f"Bearer {KEY}"}), 404)
    assert_openai_error(raw(server, None, data="{not json"), 400)
    assert_openai_error(raw(server, None, data=b'{"model":"gossamer-demo","messages":'
                                               b'[{"role":"user","content":"\xff\xfe"}]}'), 400)
    e = assert_openai_error(raw(server, dict(base, temperature="hot")), 400)
    assert "temperature" in e["message"]
    e = assert_openai_error(raw(server, dict(base, messages=[{"role": "wizard",
                                                              "content": "x"}])), 400)
    assert "role" in e["message"]
    bad_tool = [{"type": "function", "function": {"name": "f", "parameters": "not an object"}}]
    assert_openai_error(raw(server, dict(base, tools=bad_tool)), 400)
    # Features this server does not offer are the client's error too (400, not 500).
    image = [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "x"}}]}]
    e = assert_openai_error(raw(server, dict(base, messages=image)), 400)
    assert "image_url" in e["message"] and e["type"] == "invalid_request_error"
    web = [{"type": "web_search"}]
    assert_openai_error(raw(server, dict(base, tools=web)), 400)
    e = assert_openai_error(raw(server, dict(base, max_tokens=100000)), 400)
    assert "2048" in e["message"]
    assert_openai_error(raw(server, dict(base, messages="x" * 70000)), 413)
    with pytest.raises(openai.BadRequestError):
        client.completions.create(model=MODEL, prompt=[10**9], max_tokens=2)
    assert requests.get(server.base + "/health").status_code == 200  # still alive


def test_tokenize_detokenize(server, tokenizer_json):
    from tokenizers import Tokenizer
    tok = Tokenizer.from_file(str(tokenizer_json))
    h = {"Authorization": f"Bearer {KEY}"}
    t = requests.post(server.base + "/tokenize", headers=h, json={"prompt": "héllo wörld"}).json()
    assert t["tokens"] == tok.encode("héllo wörld").ids
    d = requests.post(server.base + "/detokenize", headers=h, json={"tokens": t["tokens"]}).json()
    assert d["prompt"] == "héllo wörld"


def test_queue_full_gives_429(server, cache, tokenizer_json):
    s = Server(cache, tokenizer_json, "--max-queue", "1", "--max-num-seqs", "1")
    try:
        body = {"model": MODEL, "messages": MSGS, "max_tokens": 40}

        def one(_):
            return raw(s, body, key=None, timeout=300)

        with concurrent.futures.ThreadPoolExecutor(16) as ex:
            rs = list(ex.map(one, range(16)))
        codes = [r.status_code for r in rs]
        assert 200 in codes and 429 in codes, codes
        r429 = next(r for r in rs if r.status_code == 429)
        assert r429.headers.get("Retry-After") == "1"
        assert_openai_error(r429, 429)
    finally:
        assert s.stop() == 0


def test_listen_backlog_takes_a_burst_of_connects(server):
    """While the server is stopped (SIGSTOP: nothing accepts), the kernel completes handshakes
    only up to the listen backlog. httplib's built-in backlog of 5 left the rest of a burst of
    64 clients waiting for the 1 s SYN retry; every one of them must connect at once."""
    socks = []
    os.kill(server.proc.pid, signal.SIGSTOP)
    try:
        for _ in range(64):
            s = socket.socket()
            s.setblocking(False)
            s.connect_ex(("127.0.0.1", server.port))
            socks.append(s)
        deadline = time.time() + 0.5
        pending = list(socks)
        while pending and time.time() < deadline:
            _, writable, _ = select.select([], pending, [], 0.05)
            pending = [s for s in pending if s not in writable]
        errors = [s.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR) for s in socks
                  if s not in pending]
        assert not pending and not any(errors), f"{len(pending)} of 64 connects still pending"
    finally:
        os.kill(server.proc.pid, signal.SIGCONT)
        for s in socks:
            s.close()
    assert requests.get(server.base + "/health", timeout=10).status_code == 200


def test_a_port_in_use_is_refused(server, tokenizer_json, tmp_path):
    """A second server on a live server's port exits with an error naming the address (httplib's
    default SO_REUSEPORT would have let both listen and split the connections)."""
    p = subprocess.run([gossamer_bin(), "serve", "--port", str(server.port), "--tokenizer",
                        str(tokenizer_json), "--backend", "fake"], capture_output=True, text=True,
                       timeout=120, env=dict(os.environ, GOSSAMER_CACHE=str(tmp_path)))
    assert p.returncode != 0 and f"cannot listen on 127.0.0.1:{server.port}" in p.stderr, p.stderr
