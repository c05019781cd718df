#!/usr/bin/env python3
"""A stand-in for swin-aot that records its outputs here and replays them on a
GPU machine that has no LLVM/MLIR 22 (the lent device machine, a deployment
host): the GPU tests and bench/gpu_bench.py then run there unchanged.

Record (here, where swin-aot is built; scripts/device/record.py does it):

    AOT_REPLAY_STORE=DIR AOT_REPLAY_REAL=build/bin/swin-aot \
        SWIN_AOT=scripts/device/aot-replay.py python3 ...

runs the real swin-aot and keeps every ``kernel.*`` file it wrote, under a key
made of its arguments (the ``-o`` directory left out, ``--table`` replaced by
the table's SHA-256). Replay (there): the same without ``AOT_REPLAY_REAL``
copies the recorded files to the asked ``-o`` directory, and fails with the
arguments it was given for anything not recorded. The GPU host runtime (a C
file) is still built where it runs, against that machine's CUDA
(scripts/device/check.sh).
"""

import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path


def key_of(args):
    kept = []
    skip_next = False
    for arg in args:
        if skip_next:
            skip_next = False
        elif arg == "-o":
            skip_next = True
        elif arg.startswith("--table="):
            kept.append("--table-sha256=" + hashlib.sha256(Path(arg[8:]).read_bytes()).hexdigest())
        elif not arg.startswith("--cuda-toolkit="):
            kept.append(arg)
    return hashlib.sha256(json.dumps(kept).encode()).hexdigest()[:32], kept


def output_dir(args):
    return Path(args[args.index("-o") + 1]).parent


def main(args):
    store = Path(os.environ["AOT_REPLAY_STORE"])
    real = os.environ.get("AOT_REPLAY_REAL")
    if args == ["--version"]:
        if real:
            text = subprocess.run([real, "--version"], capture_output=True, text=True,
                                  check=True).stdout
            store.mkdir(parents=True, exist_ok=True)
            (store / "version.txt").write_text(text)
        sys.stdout.write((store / "version.txt").read_text())
        return 0
    key, kept = key_of(args)
    entry = store / key
    if real:
        proc = subprocess.run([real, *args])
        if proc.returncode == 0:
            entry.mkdir(parents=True, exist_ok=True)
            for f in output_dir(args).glob("kernel.*"):
                shutil.copy2(f, entry / f.name)
            (entry / "args.json").write_text(json.dumps(kept))
        return proc.returncode
    if not entry.is_dir():
        sys.stderr.write(f"aot-replay: not recorded: {' '.join(kept)}\n")
        return 1
    for f in entry.glob("kernel.*"):
        shutil.copy2(f, output_dir(args) / f.name)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
