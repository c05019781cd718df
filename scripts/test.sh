#!/usr/bin/env bash
# Runs every test suite: the lit/FileCheck suite (check-swin) and the Python
# suite (reference self-tests and generated kernels against the reference).
# SWIN_SANITIZE=1 runs the lit suite on the ASan/UBSan build instead.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD_DIR="$ROOT/build"
if [[ "${SWIN_SANITIZE:-0}" == 1 ]]; then
  BUILD_DIR="$ROOT/build-asan"
  # libMLIR.so is not instrumented: see the ASAN_OPTIONS in scripts/fuzz.sh.
  export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}allow_user_poisoning=0"
fi
PYTHON="${PYTHON:-python3}"

cmake --build "$BUILD_DIR"
cmake --build "$BUILD_DIR" --target check-swin

if [[ -d "$ROOT/python/tests" ]]; then
  # The kernels must be built and tested here: a missing swin-aot fails.
  SWIN_REQUIRE_AOT=1 SWIN_AOT="$BUILD_DIR/bin/swin-aot" \
    SWIN_OPT_CACHE_DIR="$BUILD_DIR/kernel-cache" PYTHONPATH="$ROOT/python" \
    "$PYTHON" -m pytest -q "$ROOT/python/tests"
fi
