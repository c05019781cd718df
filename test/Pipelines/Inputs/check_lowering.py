"""Runs every input of the test suite through the pipelines and LLVM IR
translation (test/Pipelines/lowering-complete.test).

A pipeline either lowers an input to what `mlir-translate --mlir-to-llvmir`
accepts or refuses it with an error. This fails on anything else: a
pipeline that exits 0 with IR that does not translate, an op that
rpe-check-lowered finds unlowered, a crash, a failure without an error.

The inputs are every .mlir file under the test directory whose RUN lines do
not verify diagnostics (those hold invalid IR on purpose), each chunk of a
split file on its own, and, with --execution-tests, the modules that the
execution tests generate (their `%{case} emit ARGS > %t.NAME.mlir` lines).
"""

import argparse
import concurrent.futures
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

SPLIT_MARKER = re.compile(r"^// -----[ \t]*$", re.MULTILINE)
# What rpe-check-lowered reports (lib/Transforms/Pipelines.cpp).
UNLOWERED = "remains after lowering"


def file_inputs(test_dir):
    """(name, text) of each chunk of each .mlir file that holds valid IR."""
    for path in sorted(test_dir.rglob("*.mlir")):
        text = path.read_text()
        run_lines = [line for line in text.splitlines() if "RUN:" in line]
        if any("verify-diagnostics" in line for line in run_lines):
            continue
        name = str(path.relative_to(test_dir))
        if not any("split-input-file" in line for line in run_lines):
            yield name, text
            continue
        # Each chunk keeps its lines' numbers, so errors point into the file.
        start = 0
        for index, chunk in enumerate(SPLIT_MARKER.split(text)):
            yield f"{name} (chunk {index + 1})", "\n" * start + chunk
            start += chunk.count("\n")


def execution_inputs(execution_dir, python):
    """(name, text) of each module that an execution test generates."""
    define = re.compile(r"DEFINE: %\{(\w+)\} = %python %S/(\S+\.py)\s*$")
    emit = re.compile(r"RUN: %\{(\w+)\} emit (.*?) > %t\.([\w.-]+)\.mlir\s*$")
    for test in sorted(execution_dir.glob("*.test")):
        scripts = {}
        for line in test.read_text().splitlines():
            if match := define.search(line):
                scripts[match[1]] = execution_dir / match[2]
            elif (match := emit.search(line)) and match[1] in scripts:
                command = [python, str(scripts[match[1]]), "emit",
                           *shlex.split(match[2])]
                module = subprocess.run(command, capture_output=True,
                                        text=True, check=True).stdout
                yield f"{test.name}: {match[3]}.mlir", module


def lower(name, text, pipeline, args):
    """None if `pipeline` lowers `text` completely or refuses it with an
    error; else why not."""
    run = subprocess.run([args.swin_opt, "-", f"--{pipeline}"], input=text,
                         capture_output=True, text=True)
    errors = run.stderr
    if run.returncode == 0:
        if "error:" in errors:
            return "reports an error but exits 0:\n" + errors
        translate = subprocess.run([args.translate, "--mlir-to-llvmir"],
                                   input=run.stdout, capture_output=True,
                                   text=True)
        if translate.returncode == 0:
            return None
        return "exits 0 with IR that does not translate:\n" + translate.stderr
    if run.returncode != 1 or "Stack dump" in errors:
        return f"crashes (exit {run.returncode}):\n{errors}"
    if UNLOWERED in errors:
        return "leaves ops unlowered:\n" + errors
    if "error:" not in errors:
        return "fails without an error:\n" + errors
    return None


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("test_dir", type=Path)
    parser.add_argument("--swin-opt", required=True)
    parser.add_argument("--translate", required=True)
    parser.add_argument("--toolkit", required=True,
                        help="CUDA toolkit for rpe-gpu-pipeline")
    parser.add_argument("--execution-tests", type=Path,
                        help="also the modules these tests generate")
    parser.add_argument("--python", default=sys.executable)
    args = parser.parse_args()

    inputs = list(file_inputs(args.test_dir))
    if args.execution_tests:
        inputs += execution_inputs(args.execution_tests, args.python)
    pipelines = ["rpe-cpu-pipeline",
                 f"rpe-gpu-pipeline=toolkit={args.toolkit}"]
    jobs = [(name, text, pipeline) for name, text in inputs
            for pipeline in pipelines]
    with concurrent.futures.ThreadPoolExecutor(os.cpu_count() or 1) as pool:
        results = list(pool.map(lambda job: lower(*job, args), jobs))

    failures = 0
    for (name, _, pipeline), failure in zip(jobs, results):
        if failure:
            failures += 1
            print(f"FAIL {name}, {pipeline.split('=')[0]}: {failure}")
    print(f"{len(inputs)} inputs, {len(pipelines)} pipelines: "
          f"{failures} failures")
    # An empty walk would pass every check: a test that cannot fail.
    if not inputs:
        print(f"no inputs found under {args.test_dir}")
        return 1
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
