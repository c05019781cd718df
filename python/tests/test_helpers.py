"""Tests of driver helpers that need neither swin-aot nor a C compiler."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import swin_opt
from swin_opt import testing as T


# --------------------------------------------------------------------------- #
# bfloat16 conversion
# --------------------------------------------------------------------------- #
def _bf16_nearest_even(x: np.ndarray) -> np.ndarray:
    """Slow reference: pick the nearer of the two bf16 neighbours (even on ties)."""
    x = x.astype(np.float32)
    lo = (x.view(np.uint32) & np.uint32(0xFFFF0000)).view(np.float32)  # truncation
    lo_bits = (lo.view(np.uint32) >> 16).astype(np.uint32)
    hi_bits = lo_bits + 1
    hi = (hi_bits << 16).view(np.float32)
    d_lo = np.abs(x.astype(np.float64) - lo.astype(np.float64))
    d_hi = np.abs(hi.astype(np.float64) - x.astype(np.float64))
    pick_hi = (d_hi < d_lo) | ((d_hi == d_lo) & (lo_bits % 2 == 1))
    return np.where(pick_hi, hi_bits, lo_bits).astype(np.uint16)


def test_bf16_round_trip_exact_values():
    vals = np.array([0.0, -0.0, 1.0, -2.5, 0.15625, 3.0e38, 1e-40, np.inf, -np.inf], np.float32)
    exact = T.round_to_dtype(vals, "bf16")
    bits = swin_opt.float32_to_bf16_bits(exact)
    np.testing.assert_array_equal(swin_opt.bf16_bits_to_float32(bits), exact)
    assert swin_opt.float32_to_bf16_bits(np.float32(1.0)) == 0x3F80
    assert swin_opt.float32_to_bf16_bits(np.float32(-2.0)) == 0xC000


def test_bf16_ties_to_even():
    one = 1.0
    ulp = 2.0 ** -7  # bf16 spacing at 1.0
    cases = {
        one + ulp / 2: 0x3F80,  # tie -> even (1.0)
        one + 3 * ulp / 2: 0x3F82,  # tie -> even (1 + 2 ulp)
        one + ulp / 2 + 2.0 ** -20: 0x3F81,  # just above the tie -> up
        -(one + ulp / 2): 0xBF80,
    }
    for value, expected in cases.items():
        assert int(swin_opt.float32_to_bf16_bits(np.float32(value))) == expected, value


def test_bf16_random_matches_slow_reference():
    rng = np.random.default_rng(0)
    x = (rng.standard_normal(100_000) * np.exp(rng.uniform(-20, 20, 100_000))).astype(np.float32)
    np.testing.assert_array_equal(swin_opt.float32_to_bf16_bits(x), _bf16_nearest_even(x))


def test_bf16_special_values():
    bits = swin_opt.float32_to_bf16_bits(np.array([np.nan, np.float32(3.4e38), -np.inf], np.float32))
    back = swin_opt.bf16_bits_to_float32(bits)
    assert np.isnan(back[0])
    assert back[1] == np.inf  # rounds past the largest bf16
    assert back[2] == -np.inf
    with pytest.raises(TypeError, match="uint16"):
        swin_opt.bf16_bits_to_float32(np.zeros(3, np.float32))


# --------------------------------------------------------------------------- #
# Configuration handling
# --------------------------------------------------------------------------- #
@pytest.mark.parametrize(
    "value,code",
    [("float32", "f32"), ("f16", "f16"), (np.float16, "f16"), (np.dtype("float32"), "f32"),
     ("bfloat16", "bf16"), ("BF16", "bf16"), ("torch.bfloat16", "bf16"), ("half", "f16")],
)
def test_normalize_dtype(value, code):
    assert swin_opt.normalize_dtype(value) == code


def test_normalize_dtype_rejects():
    with pytest.raises(ValueError, match="unsupported dtype"):
        swin_opt.normalize_dtype("float64")


def _cfg(window=(7, 7), heads=3, head_dim=32, **kw):
    return swin_opt.make_config(window, heads, head_dim, **kw)


def test_config_args():
    cfg = _cfg(resolution=(56, 56), shift=3, scale=0.125, name="attn")
    assert cfg.aot_args() == [
        "--window=7,7", "--heads=3", "--head-dim=32", "--scale=0.125",
        "--resolution=56,56", "--shift=3,3", "--dtype=f32", "--target=cpu", "--name=attn",
    ]
    assert cfg.windows_per_image == 64
    assert cfg.table_rows == 169 and cfg.tokens_per_window == 49 and cfg.channels == 96
    assert _cfg().aot_args() == ["--window=7,7", "--heads=3", "--head-dim=32", "--dtype=f32",
                                 "--target=cpu"]
    cfg3 = _cfg(window=(2, 7, 7), resolution=(8, 56, 56), shift=(1, 3, 3), dtype="bf16")
    assert "--window=2,7,7" in cfg3.aot_args() and "--shift=1,3,3" in cfg3.aot_args()
    assert "--dtype=bf16" in cfg3.aot_args()
    assert cfg3.windows_per_image == 4 * 64
    assert _cfg(kernel="warps").aot_args()[-1] == "--kernel=warps"
    # the warp kernel's blocks: the GPU's (its default kernel) and the emulation's
    assert "--warps-per-block=1" in _cfg(target="nvptx", warps_per_block=1).aot_args()
    assert "--warps-per-block=2" in _cfg(kernel="warps", warps_per_block=2).aot_args()


def test_config_padding_windows_layout_uses_padded_resolution():
    cfg = _cfg(resolution=(9, 13), window=(4, 6), shift=(2, 3), padding="timm")
    assert "--resolution=12,18" in cfg.aot_args()
    assert cfg.windows_per_image == 9
    tok = _cfg(resolution=(9, 13), window=(4, 6), shift=(2, 3), padding="hf", layout="tokens")
    args = tok.aot_args()
    assert "--resolution=9,13" in args and "--layout=tokens" in args
    assert "--padding=pad-then-shift" in args


@pytest.mark.parametrize(
    "kwargs,exc,match",
    [
        (dict(window=(7,)), ValueError, "2 or 3 axes"),
        (dict(window=(7, 0)), ValueError, "positive"),
        (dict(heads=0), ValueError, "heads must be positive"),
        (dict(head_dim=2.5), TypeError, "head_dim must be an int"),
        (dict(shift=3), ValueError, "shift requires resolution"),
        (dict(resolution=(56,)), ValueError, "as many axes"),
        (dict(resolution=(57, 56)), ValueError, "not divisible"),
        (dict(layout="nchw"), ValueError, "layout"),
        (dict(padding="reflect", resolution=(56, 56)), ValueError, "unknown padding"),
        (dict(dtype="float64"), ValueError, "unsupported dtype"),
        (dict(name="bad name"), ValueError, "C identifier"),
        (dict(scale=float("nan")), ValueError, "finite"),
        (dict(layout="tokens"), ValueError, "requires resolution"),
        (dict(kernel="bogus"), ValueError, "kernel must be 'tiles', 'warps' or 'rows'"),
        (dict(warps_per_block=2), ValueError, "takes kernel='warps'"),
        (dict(warps_per_block=2, target="nvptx", kernel="rows"), ValueError,
         "takes kernel='warps'"),
        (dict(warps_per_block=33, target="nvptx"), ValueError, "must be 1 to 32"),
    ],
)
def test_config_errors(kwargs, exc, match):
    with pytest.raises(exc, match=match):
        _cfg(**kwargs)


def test_missing_swin_aot(monkeypatch, tmp_path):
    monkeypatch.setenv("SWIN_AOT", str(tmp_path / "nope"))
    with pytest.raises(swin_opt.SwinAotNotFoundError, match="SWIN_AOT"):
        swin_opt.find_swin_aot()
    with pytest.raises(FileNotFoundError):  # SwinAotNotFoundError is a FileNotFoundError
        swin_opt.compile((7, 7), 3, 32, cache_dir=tmp_path)


def _missing_tool_message(package_parent: Path, tmp_path: Path) -> str:
    """find_swin_aot's error for a copy of the package in ``package_parent``, without
    $SWIN_AOT and with nothing on PATH (a fresh interpreter)."""
    shutil.copytree(Path(swin_opt.__file__).parent, package_parent / "swin_opt",
                    ignore=shutil.ignore_patterns("__pycache__"))
    env = {k: v for k, v in os.environ.items() if k != "SWIN_AOT"}
    env.update(PYTHONPATH=str(package_parent), PATH=str(tmp_path / "empty-path"))
    code = ("import swin_opt\ntry:\n    swin_opt.find_swin_aot()\n"
            "except swin_opt.SwinAotNotFoundError as exc:\n    print(exc)\n")
    proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.strip()


def test_missing_swin_aot_hint_of_an_installed_package(tmp_path):
    """An installed copy is not in a checkout: no '<site-packages>/../build/bin' hint."""
    site = tmp_path / "prefix" / "lib" / "python3.11" / "site-packages"
    message = _missing_tool_message(site, tmp_path)
    assert "build/bin" not in message and str(tmp_path) not in message, message
    assert "SWIN_AOT" in message and "PATH" in message, message


def test_missing_swin_aot_hint_in_a_checkout(tmp_path):
    """In a source checkout (python/swin_opt beside the CMake project) the hint names
    the build tree's swin-aot."""
    repo = tmp_path / "repo"
    (repo / "tools" / "swin-aot").mkdir(parents=True)
    (repo / "CMakeLists.txt").write_text("project(swin-opt)\n")
    message = _missing_tool_message(repo / "python", tmp_path)
    assert str(repo / "build" / "bin" / "swin-aot") in message, message
    assert "SWIN_AOT" in message, message


def test_cache_dir_env(monkeypatch, tmp_path):
    monkeypatch.setenv("SWIN_OPT_CACHE_DIR", str(tmp_path / "c"))
    assert swin_opt.get_cache_dir() == tmp_path / "c"
    monkeypatch.delenv("SWIN_OPT_CACHE_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert swin_opt.get_cache_dir() == tmp_path / "xdg" / "swin_opt"
    assert swin_opt.clear_cache(tmp_path / "missing") == 0


# --------------------------------------------------------------------------- #
# The ABI description reader
# --------------------------------------------------------------------------- #
def _description(**changes):
    data = {"format": "swin-opt-kernel-abi", "version": 1, "name": "attn", "target": "nvptx",
            "dtype": "f16", "layout": "tokens", "packed_qkv": False, "returns": "int32",
            "arguments": [
                {"name": "q", "role": "input", "ctype": "CUdeviceptr", "dtype": "f16",
                 "shape": ["batch", 196, 96], "nullable": False},
                {"name": "table", "role": "table", "ctype": "CUdeviceptr", "dtype": "f16",
                 "shape": [169, 3], "nullable": True},
                {"name": "out", "role": "output", "ctype": "CUdeviceptr", "dtype": "f16",
                 "shape": ["batch", 196, 96], "nullable": False},
                {"name": "batch", "role": "count", "ctype": "int64_t"},
                {"name": "pad_qkv", "role": "padding", "ctype": "CUdeviceptr", "dtype": "f16",
                 "shape": [3, 96], "nullable": True},
                {"name": "stream", "role": "stream", "ctype": "CUstream"}]}
    data.update(changes)
    return data


def test_abi_description_maps_to_ctypes_and_shapes():
    import ctypes

    desc = swin_opt.abi.parse(_description())
    assert desc.argtypes() == [ctypes.c_uint64] * 3 + [ctypes.c_int64, ctypes.c_uint64,
                                                       ctypes.c_void_p]
    assert desc.shapes(2) == {"q": (2, 196, 96), "table": (169, 3), "out": (2, 196, 96),
                              "pad_qkv": (3, 96)}
    assert desc.count.name == "batch" and desc.count_of("q", (5, 196, 96)) == 5
    assert desc.nbytes("out", 2) == 2 * 196 * 96 * 2
    assert desc.call_args({"q": 1, "out": 2, "batch": 3}) == [1, 0, 2, 3, 0, None]
    with pytest.raises(ValueError, match=r"q must have shape \[batch, 196, 96\]"):
        desc.count_of("q", (196, 96))


@pytest.mark.parametrize("changes,match", [
    (dict(format="other"), "not a swin-opt-kernel-abi description"),
    (dict(version=2), "description version 2"),
    (dict(returns="void"), "returning 'void'"),
    (dict(arguments=[{"name": "q", "role": "input", "ctype": "double *", "dtype": "f32",
                      "shape": [1]},
                     {"name": "n", "role": "count", "ctype": "int64_t"}]),
     "unknown ctype 'double \\*'"),
    (dict(arguments=[{"name": "q", "role": "input", "ctype": "const float *", "dtype": "f32",
                      "shape": ["windows", 3]},
                     {"name": "n", "role": "count", "ctype": "int64_t"}]), "bad shape"),
    (dict(arguments=[{"name": "q", "role": "input", "ctype": "const float *", "dtype": "f32",
                      "shape": [3]}]), "expected one count argument, found 0"),
])
def test_abi_description_errors_say_rebuild(changes, match):
    with pytest.raises(swin_opt.abi.AbiError, match=match) as info:
        swin_opt.abi.parse(_description(**changes))
    assert "rebuild swin-aot" in str(info.value)


def test_abi_description_missing(tmp_path):
    with pytest.raises(swin_opt.abi.AbiError, match="k.json is missing"):
        swin_opt.abi.load(tmp_path / "k.json")


def test_overlap_check():
    desc = swin_opt.abi.parse(_description())
    q, out, pad = desc["q"], desc["out"], desc["pad_qkv"]
    swin_opt.abi.check_no_overlap([(q, 100, 50), (out, 150, 50), (pad, 0, 10)])  # adjacent, NULL
    with pytest.raises(ValueError, match="out overlaps pad_qkv"):
        swin_opt.abi.check_no_overlap([(q, 100, 50), (out, 150, 50), (pad, 199, 10)])

