#!/usr/bin/env python3
"""Compile here every kernel that scripts/device/check.sh runs on a GPU machine.

    python3 scripts/device/record.py STORE [--cpu sapphirerapids]

Runs python/tests/test_gpu.py with a stand-in GPU (its kernels compile, its
driver calls fail: only the compiles matter), records the kernels of
python/tests/test_torch_cuda.py's GPU tests (``--record``: its operator
configurations, and its swapped models run once on the CPU), then compiles
bench/gpu_bench.py's kernels (its model's too) and bench/cross_cpu.py's for
--cpu, all through aot-replay.py, which keeps swin-aot's outputs in STORE for
the machine without LLVM to replay. The GPU kernels are recorded for --chip
(the lent machine's H200: sm_90). The GPU tests and gpu_bench.py run with the
torch venv's Python ($SWIN_VENV, default build/venv) where it exists: without
torch (and timm), the kernels of the torch tests and of the model are not
recorded (they fail there as not recorded).
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
    parser.add_argument("--chip", default="sm_90", help="the GPU of the machine that replays")
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
        torch_tests = subprocess.run([str(args.python),
                                      str(ROOT / "python" / "tests" / "test_torch_cuda.py"),
                                      "--record", "--chip", args.chip], env=env, check=False)
        if torch_tests.returncode != 0:
            print("record: the kernels of test_torch_cuda.py's GPU tests are not recorded "
                  f"(no torch or timm for {args.python}?)")
        for python, script in ((args.python, ["bench/gpu_bench.py", "--record", "--backward",
                                              "--chip", args.chip]),
                               (sys.executable, ["bench/cross_cpu.py", "--record", "--cpu",
                                                 args.cpu])):
            subprocess.run([str(python), str(ROOT / script[0]), *script[1:]], env=env,
                           check=True)
    print(f"recorded {sum(1 for _ in args.store.iterdir()) - 1} kernels in {args.store}")


if __name__ == "__main__":
    main()
