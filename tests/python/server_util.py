"""Helpers of the end-to-end tests of `gossamer serve` driven by the official openai SDK
(test_server*.py, test_server_api_*.py, test_structured_output.py).

A server is started on a free loopback port with the built-in demo model (tiny, random weights,
synthesised into a temporary cache dir with the real tokenizer). Its text is noise, so the checks
are about API shapes, consistency between endpoints/modes, and error behaviour; independent
oracles are the SDK's own parsing, openai-harmony (prompt token counts) and the tokenizers
library (detokenisation).
"""
import json
import os
import socket
import subprocess
import time

import openai
import pytest
import requests

from conftest import gossamer_bin

KEY = "test-key-123"
MODEL = "gossamer-demo"


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    def __init__(self, cache, tokenizer, *extra):
        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        env = dict(os.environ, GOSSAMER_CACHE=str(cache))
        self.log = open(cache / f"serve-{self.port}.log", "w+")
        self.proc = subprocess.Popen(
            [gossamer_bin(), "serve", "--port", str(self.port), "--tokenizer", str(tokenizer),
             "--date", "2025-06-28", *map(str, extra)],
            stdout=subprocess.DEVNULL, stderr=self.log, env=env)
        deadline = time.time() + 120
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError("server exited:\n" + self.stderr())
            try:
                if requests.get(self.base + "/health", timeout=1).status_code == 200:
                    return
            except requests.RequestException:
                time.sleep(0.2)
        raise RuntimeError("server did not start:\n" + self.stderr())

    def stderr(self):
        self.log.flush()
        self.log.seek(0)
        return self.log.read()

    def stop(self):
        self.proc.terminate()
        try:
            rc = self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            raise
        return rc


def serve_fixtures(*serve_args, api_key, check_log):
    """Module-scoped fixtures `server` (a demo-model server started with `serve_args`; at the end
    it must exit 0 and its log must pass check_log) and `client` (the openai SDK on it, with
    `api_key`). A test module takes them with `server, client = serve_fixtures(...)`."""
    @pytest.fixture(scope="module")
    def server(cache, tokenizer_json):
        s = Server(cache, tokenizer_json, *serve_args)
        yield s
        assert s.stop() == 0, s.stderr()
        check_log(s.stderr())

    @pytest.fixture(scope="module")
    def client(server):
        return openai.OpenAI(base_url=server.base + "/v1", api_key=api_key, max_retries=0)

    return server, client


# ---- the server of test_server*.py: an API key, a 64 KiB body limit -------------------------

def _check_keyed_log(err):
    assert "NOISE" in err  # the demo model says loudly that its text is noise
    assert "step failed" not in err and "ERROR" not in err.upper().replace("ERRORS", ""), err


def keyed_server_fixtures():
    """The `server` and `client` fixtures of test_server*.py."""
    return serve_fixtures("--api-key", KEY, "--default-max-tokens", "24", "--max-body-bytes",
                          "65536", "--max-model-len", "2048", api_key=KEY,
                          check_log=_check_keyed_log)


MSGS = [{"role": "system", "content": "You are terse."},
        {"role": "user", "content": "Name three colours."}]


def raw(server, body, path="/v1/chat/completions", key=KEY, data=None, timeout=60):
    h = {"Content-Type": "application/json"}
    if key:
        h["Authorization"] = f"Bearer {key}"
    return requests.post(server.base + path, headers=h,
                         data=data if data is not None else json.dumps(body), timeout=timeout)


def assert_openai_error(r, status):
    assert r.status_code == status, r.text
    e = r.json()["error"]
    assert set(e) == {"message", "type", "param", "code"} and e["message"]
    return e
