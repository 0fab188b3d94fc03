"""Helpers of the second end-to-end suite of `gossamer serve` (test_server_api_*.py): its server
(demo model, CPU backend, no API key, at most 6 stored responses), messages and /metrics reader.

The demo model has random weights, so the checks compare endpoints and modes with each other and
with independent oracles (the tokenizers library, the SDK's parsing), never with fixed text.
"""
import requests

from server_util import serve_fixtures

MSGS = [{"role": "user", "content": "What is the weather in Paris?"}]


def _check_log(err):
    assert "step failed" not in err


ORIGIN = "http://localhost:3000"  # the one origin whose browser pages may call these servers


def api_server_fixtures():
    """The `server` and `client` fixtures of test_server_api_*.py."""
    return serve_fixtures("--default-max-tokens", "24", "--max-model-len", "2048",
                          "--responses-store-max", "6", "--allowed-origin", ORIGIN,
                          api_key="x", check_log=_check_log)


def metrics(server):
    text = requests.get(server.base + "/metrics").text
    vals = {}
    for ln in text.splitlines():
        if ln and not ln.startswith("#") and "_bucket" not in ln:
            name = ln.split("{")[0].split()[0]
            if 'finished_reason="' in ln:
                name += ":" + ln.split('finished_reason="')[1].split('"')[0]
            vals[name] = float(ln.split()[-1])
    return vals

