#!/usr/bin/env bash
# Installs what swin-opt needs on a Debian bookworm machine (when missing),
# creates the Python test environment (a venv with torch, torchvision, timm,
# transformers; see scripts/python-env.sh), then configures and builds into
# build/. Idempotent: a second run installs nothing and rebuilds only what
# changed.
#
#   scripts/setup.sh              # Release build in build/, venv in build/venv
#   SWIN_SANITIZE=1 scripts/setup.sh   # ASan/UBSan build in build-asan/
#   SWIN_VENV=DIR scripts/setup.sh     # the venv in DIR (shared by checkouts)
#   SWIN_WM_VENV=DIR scripts/setup.sh  # its torch-mlir layer in DIR (build/venv-wm)
#   SWIN_TORCH=0 scripts/setup.sh      # no venv (offline; not under CI=true)
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
APT_PACKAGES=(
  llvm-22-dev libmlir-22-dev mlir-22-tools llvm-22-tools clang-22 lld-22
  liblld-22-dev libomp-22-dev libclang-rt-22-dev libgomp1
  cmake ninja-build ccache
  python3 python3-venv python3-pip
)

missing=()
for pkg in "${APT_PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing+=("$pkg")
done
if ((${#missing[@]})); then
  echo "setup: installing ${missing[*]}"
  SUDO=""
  [[ $(id -u) -ne 0 ]] && SUDO=sudo
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

PYTHON="${PYTHON:-python3}"
if ! "$PYTHON" -c "import numpy, pytest" 2>/dev/null; then
  echo "setup: installing numpy and pytest with pip"
  "$PYTHON" -m pip install -q numpy pytest
fi

# Before the (long) build, so that a machine without network fails early.
source "$ROOT/scripts/python-env.sh"
if swin_torch_enabled; then
  swin_venv_ensure
  swin_wm_venv_ensure
else
  echo "setup: SWIN_TORCH=0: no Python test environment; the torch tests will skip"
fi

if [[ "${SWIN_SANITIZE:-0}" == 1 ]]; then
  BUILD_DIR="$ROOT/build-asan"
  EXTRA=(-DSWIN_ENABLE_SANITIZERS=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo)
else
  BUILD_DIR="$ROOT/build"
  EXTRA=(-DCMAKE_BUILD_TYPE=Release)
fi

source "$ROOT/scripts/configure.sh"
swin_configure "$BUILD_DIR" -DPython3_EXECUTABLE="$(command -v "$PYTHON")" \
  "${EXTRA[@]}"
cmake --build "$BUILD_DIR"
echo "setup: tools are in $BUILD_DIR/bin"
