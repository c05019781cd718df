#!/usr/bin/env bash
# The wheel as a user gets it: builds it (pyproject.toml: scikit-build-core
# over the CMake build, swin-opt and swin-aot linked statically into the
# swin_opt package), installs it into a fresh venv beside torch, torchvision,
# timm and transformers, and runs test/wheel/test_installed_wheel.py there
# with /usr/lib/llvm-22 and /usr/local/cuda hidden: empty directories are
# mounted over them in a private mount namespace (unshare -m: run as root),
# so that a dependency on the build machine's LLVM or CUDA fails the test.
#
# Reuse: the CMake build stays in build-wheel/ (scikit-build-core's build-dir)
# and is rebuilt incrementally; its compile commands differ from build/'s only
# in the build directory, which CCACHE_BASEDIR makes relative (both sit right
# under the root), so the compiles hit what building build/ put in ccache. What
# remains is linking the two static tools (lld: about 1.2 GB of memory and 10 s each).
# The venv is layered on the torch venv of scripts/python-env.sh (a .pth file
# names its site-packages): torch and its 5.7 GB are not installed twice. The
# wheel goes in with pip --no-index, so its requirements must be met there.
#
#   scripts/wheel.sh
#   SWIN_WHEEL_VENV=DIR   the test venv (default build-wheel/venv), made anew
#   SWIN_VENV=DIR         the torch venv (scripts/python-env.sh)
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
PYTHON="${PYTHON:-python3}"
source "$ROOT/scripts/python-env.sh"
if ! swin_torch_enabled; then
  echo "error: SWIN_TORCH=0: the wheel is tested beside torch (scripts/python-env.sh's venv)" >&2
  exit 1
fi
swin_venv_ensure

now() { date +%s.%N; }
since() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }'; }

# Build.
start=$(now)
if command -v ccache >/dev/null; then
  export CCACHE_BASEDIR="${CCACHE_BASEDIR:-$ROOT}"
  export CMAKE_C_COMPILER_LAUNCHER=ccache CMAKE_CXX_COMPILER_LAUNCHER=ccache
fi
dist="$ROOT/build-wheel/dist"
log="$ROOT/build-wheel/pip-wheel.log"
rm -rf "$dist"
mkdir -p "$dist"
if ! "$PYTHON" -m pip wheel . --no-deps --progress-bar off -v -w "$dist" >"$log" 2>&1; then
  tail -n 40 "$log" >&2
  echo "error: building the wheel failed (the whole log: ${log#"$ROOT"/})" >&2
  exit 1
fi
wheels=("$dist"/swin_opt-*.whl)
wheel="${wheels[0]}"
echo "wheel: built $(basename "$wheel") ($(du -m "$wheel" | cut -f1) MB) in $(since "$start") s"

# Install into a fresh venv over the torch venv.
venv="${SWIN_WHEEL_VENV:-$ROOT/build-wheel/venv}"
rm -rf "$venv"
"$(swin_venv_python)" -m venv --without-pip "$venv"
base="$("$(swin_venv_python)" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
layer="$("$venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
echo "$base" >"$layer/swin-opt-torch-venv.pth"
start=$(now)
"$venv/bin/python" -m pip install --no-index --progress-bar off -q "$wheel"
echo "wheel: pip install took $(since "$start") s ($(du -sm "$layer/swin_opt" | cut -f1) MB installed) into $venv"

# Test it with LLVM and CUDA out of reach, from outside the checkout.
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
start=$(now)
set +e
unshare --mount --propagation private -- bash -euc '
  for dir in /usr/lib/llvm-22 /usr/local/cuda; do
    if [[ -d $dir ]]; then mount -t tmpfs -o ro,size=1k none "$dir"; fi
  done
  cd "$1"
  exec env -u SWIN_AOT -u PYTHONPATH -u CUDA_HOME -u SWIN_OPT_CACHE_DIR \
    PATH="$2/bin:/usr/local/bin:/usr/bin:/bin" HOME="$1" PYTHONDONTWRITEBYTECODE=1 \
    "$2/bin/python" -m pytest -q -rs -p no:cacheprovider "$3"
' _ "$work" "$venv" "$ROOT/test/wheel/test_installed_wheel.py"
rc=$?
set -e
echo "wheel: the LLVM-less test took $(since "$start") s"
exit $rc
