#!/usr/bin/env bash
# Runs every test suite: the lit/FileCheck suite (check-swin) and the Python
# suite (reference self-tests, generated kernels against the reference, the
# PyTorch integration) in the venv of scripts/python-env.sh, which it creates
# or updates first when setup.sh has not (SWIN_TORCH=0: with $PYTHON, the
# torch tests skipping). SWIN_SANITIZE=1 runs the lit suite on the ASan/UBSan
# build instead. The Python suite's output, with its 25 slowest tests (where
# CI's time goes), is also in BUILD_DIR/pytest.log.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD_DIR="$ROOT/build"
if [[ "${SWIN_SANITIZE:-0}" == 1 ]]; then
  BUILD_DIR="$ROOT/build-asan"
  # libMLIR.so is not instrumented: see the ASAN_OPTIONS in scripts/fuzz.sh.
  export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}allow_user_poisoning=0"
fi
PYTHON="${PYTHON:-python3}"

# The Python environment first: a missing one fails before the long steps.
source "$ROOT/scripts/python-env.sh"
if swin_torch_enabled; then
  swin_venv_ensure
  # torch-mlir for the whole-model tests, layered on the torch venv.
  swin_wm_venv_ensure
  PYTEST_PYTHON="$(swin_wm_venv_python)"
  # Here torch is installed: a torch test skipping for an import is a failure.
  export SWIN_REQUIRE_TORCH=1
else
  PYTEST_PYTHON="$PYTHON"
  echo "test: SWIN_TORCH=0: the Python suite runs with $PYTHON, the torch tests skip"
fi

cmake --build "$BUILD_DIR"
cmake --build "$BUILD_DIR" --target check-swin

# The kernels must be built and tested here: a missing swin-aot fails.
log="$BUILD_DIR/pytest.log"
set +e
SWIN_REQUIRE_AOT=1 SWIN_AOT="$BUILD_DIR/bin/swin-aot" \
  SWIN_OPT_CACHE_DIR="$BUILD_DIR/kernel-cache" PYTHONPATH="$ROOT/python" \
  "$PYTEST_PYTHON" -m pytest -q -rs --durations=25 "$ROOT/python/tests" 2>&1 | tee "$log"
rc=${PIPESTATUS[0]}
set -e
echo "test: pytest ($PYTEST_PYTHON): $(tail -n 1 "$log")"
case $rc in
  0) ;;
  5) echo "error: pytest collected no tests (exit code 5)" >&2; exit 1 ;;
  *) echo "error: pytest failed (exit code $rc)" >&2; exit "$rc" ;;
esac
