"""Helpers of the checkpoint-loading robustness tests (test_checkpoint_errors_*.py).

`gossamer synth` makes two small valid checkpoints (the `bases` fixture in conftest.py:
single-file MXFP4; bf16 experts in 4 shards with model.safetensors.index.json). Every case copies
one and breaks one thing, with the mutations below; check_load runs the loading commands
(`gossamer inspect DIR`: the full load_model; `gossamer run --model DIR`: load and run the CPU
engine), which must exit with status 1 within a timeout, never by a signal, printing an error
that names the problem: file, tensor or field, byte offset where the framing is at fault.
"""
import json
import shutil
import struct
import subprocess

from conftest import gossamer_bin

TIMEOUT_S = 30
ST = "model.safetensors"
INDEX = "model.safetensors.index.json"
CFG = "config.json"
TOK = "tokenizer.json"
SH2, SH3 = "model-00002-of-00004.safetensors", "model-00003-of-00004.safetensors"
SINKS0, SINKS1 = "model.layers.0.self_attn.sinks", "model.layers.1.self_attn.sinks"
ROUTER0 = "model.layers.0.mlp.router.weight"
SCALES0 = "model.layers.0.mlp.experts.gate_up_proj_scales"
BLOCKS1 = "model.layers.1.mlp.experts.down_proj_blocks"
QBIAS0 = "model.layers.0.self_attn.q_proj.bias"
EMBED = "model.embed_tokens.weight"
COMMANDS = {
    "inspect": lambda d: ("inspect", d),
    "run": lambda d: ("run", "--model", d, "--tokens", "1,2,3", "-n", "2", "--ids", "--threads",
                      "1", "--temperature", "0"),
    "prompt": lambda d: ("run", "--model", d, "--prompt", "Hello", "-n", "1", "--threads", "1"),
}


SANITIZER_REPORTS = ("AddressSanitizer", "LeakSanitizer", "runtime error:")


def gossamer_cmd(*args, timeout=TIMEOUT_S):
    """-> (returncode, stdout, stderr); raises subprocess.TimeoutExpired on a hang."""
    p = subprocess.run([gossamer_bin(), *map(str, args)], capture_output=True, timeout=timeout)
    return p.returncode, p.stdout.decode(errors="replace"), p.stderr.decode(errors="replace")


def check_load(d, which, must_fail, any_of=(), all_of=(), timeout=TIMEOUT_S):
    """Runs the commands `which` on checkpoint `d`. Each must exit 1 (or 0 if not `must_fail`),
    never by a signal or a hang; an error must name everything in `all_of` and something of
    `any_of`; and `run` must accept whatever `inspect` accepts (inspect validates the whole
    checkpoint: the engine must not find a problem it missed). Returns the problems found."""
    problems, rcs = [], {}
    for name in which:
        try:
            rc, _, err = gossamer_cmd(*COMMANDS[name](d), timeout=timeout)
        except subprocess.TimeoutExpired:
            problems.append(f"{name}: no exit within {timeout} s (hang)")
            continue
        rcs[name] = rc
        if any(s in err for s in SANITIZER_REPORTS):  # sanitizers exit with 1 by default
            problems.append(f"{name}: sanitizer report\n{err[-4000:]}")
            continue
        err = err[-2000:]
        if rc < 0 or rc not in ((1,) if must_fail else (0, 1)):
            problems.append(f"{name}: exit {rc}\n{err}")
        elif rc == 1 and [m for m in all_of if m not in err]:
            problems.append(f"{name}: error does not name {[m for m in all_of if m not in err]}:"
                            f"\n{err}")
        elif rc == 1 and any_of and not any(m in err for m in any_of):
            problems.append(f"{name}: error names none of {list(any_of)}:\n{err}")
    if rcs.get("inspect") == 0 and rcs.get("run", 0) != 0:
        problems.append("inspect accepts the checkpoint but run fails")
    return problems


# ---- safetensors bytes, written here (independent of gossamer's reader and writer) ----------

def split_st(b):
    n = struct.unpack("<Q", b[:8])[0]
    return json.loads(b[8:8 + n]), b[8 + n:]


def raw_st(header_bytes, data=b""):
    return struct.pack("<Q", len(header_bytes)) + header_bytes + data


def st_bytes(header, data, pad_to=8):
    text = json.dumps(header, separators=(",", ":")).encode()
    return raw_st(text + b" " * ((-(8 + len(text))) % pad_to), data)


def pack_tensors(tensors, metadata=None, align=8):
    """tensors: [(name, dtype, shape, bytes)], laid out in this order, each start aligned."""
    header, data = ({} if metadata is None else {"__metadata__": metadata}), b""
    for name, dtype, shape, raw in tensors:
        data += b"\0" * ((-len(data)) % align)
        header[name] = {"dtype": dtype, "shape": list(shape),
                        "data_offsets": [len(data), len(data) + len(raw)]}
        data += raw
    return st_bytes(header, data)


def tensors_of(path):
    """-> [(name, dtype, shape, bytes)] in header order."""
    header, data = split_st(path.read_bytes())
    return [(k, v["dtype"], v["shape"], data[v["data_offsets"][0]:v["data_offsets"][1]])
            for k, v in header.items() if k != "__metadata__"]


def header_len(b):
    return struct.unpack("<Q", b[:8])[0]


# ---- the base checkpoints (the `bases` fixture, conftest.py) -------------------------------

def copy_base(bases, dst, which="mx"):
    shutil.copytree(bases / which, dst)
    return dst


# ---- mutations: each returns a function of the checkpoint directory -------------------------

def on_file(name, fn):
    """fn(bytes) -> bytes applied to DIR/name."""
    def op(d):
        b = (d / name).read_bytes()
        (d / name).write_bytes(fn(b))
    return op


def R(fn):  # noqa: N802 - raw bytes of model.safetensors
    return on_file(ST, fn)


def H(fn, name=ST):  # noqa: N802 - the header of a safetensors file as a dict
    def op(b):
        header, data = split_st(b)
        fn(header)
        return st_bytes(header, data)
    return on_file(name, op)


def J(name, fn):  # noqa: N802 - a JSON file as an object
    return on_file(name, lambda b: (lambda o: (fn(o), json.dumps(o, indent=1).encode())[1])(
        json.loads(b)))


def set_(entry, key, value):
    return H(lambda h: h[entry].__setitem__(key, value))


def pop(entry, key=None):
    return H(lambda h: h.pop(entry) if key is None else h[entry].pop(key))


def reshape(entry, shape, dtype=None):
    """A consistent header entry of the same byte size with another shape (and dtype)."""
    return H(lambda h: h[entry].update(shape=shape, **({"dtype": dtype} if dtype else {})))


def cfg(**kv):
    return J(CFG, lambda c: c.update(kv))


def cfg_del(*keys):
    return J(CFG, lambda c: [c.pop(k, None) for k in keys])


def cfg_text(fn):
    return on_file(CFG, lambda b: fn(b.decode()).encode())


def wmap(fn):
    return J(INDEX, lambda o: fn(o["weight_map"]))


def write(name, content):
    return lambda d: (d / name).write_bytes(content if isinstance(content, bytes)
                                            else content.encode())


def deep(n=100000):
    return "[" * n + "]" * n


def rewrite(fn, **kw):
    """model.safetensors rebuilt from fn(tensors) by pack_tensors(**kw)."""
    return lambda d: (d / ST).write_bytes(pack_tensors(fn(tensors_of(d / ST)), **kw))


def seq(*ops):
    return lambda d: [op(d) for op in ops]
