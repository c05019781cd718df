#!/usr/bin/env python3
"""Compile here every kernel that scripts/device/check.sh runs on a GPU machine.

    python3 scripts/device/record.py STORE [--cpu sapphirerapids]

Runs python/tests/test_gpu.py with a stand-in GPU (its kernels compile, its
driver calls fail: only the compiles matter), then compiles bench/gpu_bench.py's
kernels and bench/cross_cpu.py's for --cpu, all through aot-replay.py, which
keeps swin-aot's outputs in STORE for the machine without LLVM to replay.
The GPU tests run with the torch venv's Python ($SWIN_VENV, default
build/venv) where it exists: without torch, the kernels of the torch tests
are not recorded (they fail there as not recorded).
"""

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

# A pytest plugin: the GPU tests run up to their first driver call.
PLUGIN = '''
import swin_opt.cuda as cuda

class _Recording:
    name = "recording"
    def __getattr__(self, name):
        raise RuntimeError("recording kernels: no GPU here")

cuda.available = lambda: "recording"
cuda.Driver = _Recording
try:
    import torch
    torch.cuda.is_available = lambda: True
except ImportError:
    pass
'''


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("store", type=Path)
    parser.add_argument("--cpu", default="sapphirerapids")
    parser.add_argument("--swin-aot", type=Path, default=ROOT / "build" / "bin" / "swin-aot")
    venv = Path(os.environ.get("SWIN_VENV", ROOT / "build" / "venv")) / "bin" / "python"
    parser.add_argument("--python", type=Path, default=venv if venv.is_file() else sys.executable,
                        help="the interpreter of the GPU tests (one with torch records all)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "record_gpu_plugin.py").write_text(PLUGIN)
        env = dict(os.environ, AOT_REPLAY_STORE=str(args.store.resolve()),
                   AOT_REPLAY_REAL=str(args.swin_aot.resolve()),
                   SWIN_AOT=str(ROOT / "scripts" / "device" / "aot-replay.py"),
                   SWIN_OPT_CACHE_DIR=str(Path(tmp) / "cache"),
                   PYTHONPATH=os.pathsep.join([str(ROOT / "python"), tmp]))
        subprocess.run([str(args.python), "-m", "pytest", "-q", "-p", "record_gpu_plugin",
                        "-p", "no:cacheprovider", str(ROOT / "python" / "tests" / "test_gpu.py")],
                       env=env, stdout=subprocess.DEVNULL, check=False)
        for script in (["bench/gpu_bench.py", "--record"],
                       ["bench/cross_cpu.py", "--record", "--cpu", args.cpu]):
            subprocess.run([sys.executable, str(ROOT / script[0]), *script[1:]], env=env,
                           check=True)
    print(f"recorded {sum(1 for _ in args.store.iterdir()) - 1} kernels in {args.store}")


if __name__ == "__main__":
    main()
