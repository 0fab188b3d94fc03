"""gossamer's safetensors reader and weight binding against independent writers.

Files are written by the `safetensors` package (torch and numpy front ends), by
huggingface_hub's sharding, and by transformers' GptOssForCausalLM.save_pretrained; `gossamer
inspect PATH --dump DIR` must report the same names, dtypes and shapes and return identical bytes.
"""
import json
import os
import struct

import numpy as np
import pytest
import torch
from safetensors import safe_open
from safetensors.numpy import save_file as np_save_file
from safetensors.torch import save_file as torch_save_file

# safetensors dtype strings, from the format specification (not from gossamer).
TORCH_DTYPES = {
    torch.float32: "F32", torch.float16: "F16", torch.bfloat16: "BF16", torch.float64: "F64",
    torch.uint8: "U8", torch.int8: "I8", torch.int16: "I16", torch.int32: "I32",
    torch.int64: "I64", torch.bool: "BOOL", torch.float8_e4m3fn: "F8_E4M3",
    torch.float8_e5m2: "F8_E5M2",
}


@pytest.fixture
def rng():
    seed = int.from_bytes(os.urandom(4), "little")
    print(f"seed {seed}")
    return np.random.default_rng(seed)


def random_tensor(rng, dtype, shape):
    n = int(np.prod(shape)) if shape else 1
    if dtype.is_floating_point:
        t = torch.from_numpy(rng.standard_normal(n).astype(np.float32)).to(dtype)
    elif dtype == torch.bool:
        t = torch.from_numpy(rng.integers(0, 2, n).astype(np.bool_))
    else:
        info = torch.iinfo(dtype)
        t = torch.from_numpy(rng.integers(info.min, info.max, n, dtype=np.int64)).to(dtype)
    return t.reshape(shape)


def tensor_bytes(t):
    return t.contiguous().reshape(-1).view(torch.uint8).numpy().tobytes()


def inspect(gossamer, path, dump_dir, check=True):
    p = gossamer("inspect", path, "--dump", dump_dir, check=check)
    if not check:
        return p
    return json.loads(p.stdout)


def check_against(report, expected, files=None):
    """expected: name -> torch tensor; files: name -> file path (optional)."""
    got = {t["name"]: t for t in report["tensors"]}
    assert sorted(got) == sorted(expected)
    for name, t in expected.items():
        g = got[name]
        assert g["dtype"] == TORCH_DTYPES[t.dtype], name
        assert g["shape"] == list(t.shape), name
        with open(g["dump"], "rb") as f:
            assert f.read() == tensor_bytes(t), name
        if files is not None:
            assert os.path.samefile(g["file"], files[name]), name


def test_single_file_every_dtype(gossamer, tmp_path, rng):
    shapes = [(3, 5), (7,), (), (0, 4), (2, 3, 4)]
    tensors = {}
    for i, dtype in enumerate(TORCH_DTYPES):
        tensors[f"t{i}.{TORCH_DTYPES[dtype].lower()}"] = random_tensor(rng, dtype,
                                                                        shapes[i % len(shapes)])
    path = tmp_path / "model.safetensors"
    torch_save_file(tensors, str(path), metadata={"format": "pt", "origin": "pytest"})
    report = inspect(gossamer, path, tmp_path / "dump")
    check_against(report, tensors)
    assert report["metadata"] == [{"format": "pt", "origin": "pytest"}]


def test_numpy_writer_file_set(gossamer, tmp_path, rng):
    a = {"x": rng.standard_normal((4, 6)).astype(np.float32),
         "y": rng.integers(0, 255, (5, 16), dtype=np.uint8)}
    b = {"z": rng.standard_normal(9).astype(np.float16)}
    np_save_file(a, str(tmp_path / "a.safetensors"))
    np_save_file(b, str(tmp_path / "b.safetensors"))
    report = inspect(gossamer, tmp_path, tmp_path.parent / (tmp_path.name + "_dump"))
    expected = {k: torch.from_numpy(v) for k, v in {**a, **b}.items()}
    files = {k: tmp_path / (("a" if k in a else "b") + ".safetensors") for k in expected}
    check_against(report, expected, files)


def test_huggingface_hub_sharding(gossamer, tmp_path, rng):
    hub = pytest.importorskip("huggingface_hub")
    sd = {f"layer.{i}.w": random_tensor(rng, torch.bfloat16, (64, 32)) for i in range(6)}
    sd["head.b"] = random_tensor(rng, torch.float32, (10,))
    model_dir = tmp_path / "m"
    model_dir.mkdir()
    hub.save_torch_state_dict(sd, model_dir, max_shard_size=10_000)
    index = json.loads((model_dir / "model.safetensors.index.json").read_text())
    assert len(set(index["weight_map"].values())) > 1, "expected several shards"
    report = inspect(gossamer, model_dir, tmp_path / "dump")
    check_against(report, sd, {k: model_dir / f for k, f in index["weight_map"].items()})


def test_transformers_gpt_oss_checkpoint(gossamer, tmp_path):
    transformers = pytest.importorskip("transformers")
    torch.manual_seed(int.from_bytes(os.urandom(4), "little"))
    cfg = transformers.GptOssConfig(
        vocab_size=96, hidden_size=64, intermediate_size=32, num_hidden_layers=3,
        num_attention_heads=4, num_key_value_heads=2, head_dim=16, num_local_experts=4,
        num_experts_per_tok=2, sliding_window=8, max_position_embeddings=512)
    model = transformers.GptOssForCausalLM(cfg).to(torch.bfloat16)
    model_dir = tmp_path / "gpt_oss_tiny"
    model.save_pretrained(model_dir)
    report = inspect(gossamer, model_dir, tmp_path / "dump")
    summary = report["model"]
    assert summary["expert_format"] == "bf16"  # HF's dequantized layout
    assert summary["num_hidden_layers"] == 3
    assert summary["num_local_experts"] == 4
    assert summary["experts_per_token"] == 2
    assert summary["vocab_size"] == 96
    check_against(report, {k: v for k, v in model.state_dict().items()})


def write_raw(path, header: dict, data: bytes):
    h = json.dumps(header).encode()
    path.write_bytes(struct.pack("<Q", len(h)) + h + data)


def python_rejects(path):
    try:
        with safe_open(str(path), framework="np") as f:
            for k in f.keys():
                f.get_tensor(k)
        return False
    except Exception:  # noqa: BLE001 - any failure means the reference rejects the file
        return True


@pytest.mark.parametrize("case", ["truncated", "overlap", "past_end", "bad_dtype", "size"])
def test_corrupt_files_rejected_like_reference(gossamer, tmp_path, case):
    path = tmp_path / f"{case}.safetensors"
    if case == "truncated":
        torch_save_file({"w": torch.zeros(16)}, str(path))
        path.write_bytes(path.read_bytes()[:20])
    elif case == "overlap":
        write_raw(path, {"a": {"dtype": "U8", "shape": [8], "data_offsets": [0, 8]},
                         "b": {"dtype": "U8", "shape": [8], "data_offsets": [4, 12]}}, bytes(12))
    elif case == "past_end":
        write_raw(path, {"a": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]}}, bytes(8))
    elif case == "bad_dtype":
        write_raw(path, {"a": {"dtype": "Q7", "shape": [4], "data_offsets": [0, 4]}}, bytes(4))
    else:
        write_raw(path, {"a": {"dtype": "F32", "shape": [3], "data_offsets": [0, 8]}}, bytes(8))
    assert python_rejects(path)
    p = inspect(gossamer, path, tmp_path / "dump", check=False)
    assert p.returncode == 1
    err = p.stderr.decode()
    assert str(path) in err
    if case != "truncated":
        assert "'a'" in err


def test_holes_tolerated_unlike_reference(gossamer, tmp_path):
    """Documented difference (docs/checkpoints.md): a gap between tensors is accepted."""
    path = tmp_path / "holes.safetensors"
    data = bytes(range(32))
    write_raw(path, {"a": {"dtype": "U8", "shape": [4], "data_offsets": [0, 4]},
                     "b": {"dtype": "U8", "shape": [4], "data_offsets": [16, 20]}}, data)
    assert python_rejects(path)
    report = inspect(gossamer, path, tmp_path / "dump")
    got = {t["name"]: open(t["dump"], "rb").read() for t in report["tensors"]}
    assert got == {"a": data[0:4], "b": data[16:20]}
