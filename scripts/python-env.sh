# Sourced by setup.sh and test.sh: the Python environment of the pytest suite.
#
# The suite runs in a virtual environment holding the versions pinned in
# python/requirements-torch.txt (torch, torchvision, timm, transformers,
# numpy, pytest; every transitive version in python/constraints-torch.txt),
# so that the PyTorch integration tests run instead of skipping. It is
# created once (about 3 GB of wheels, the CUDA ones torch links against;
# 5.7 GB on disk) and reused while the two files are unchanged: a stamp in
# the venv records their hash, and a changed pin reinstalls into it.
#
#   SWIN_VENV=DIR  where the venv lives (default: build/venv; point several
#                  checkouts or worktrees at one directory to share it)
#   SWIN_TORCH=0   no venv: the suite runs with $PYTHON and the torch tests
#                  skip (a machine without network). Refused under CI=true.
#   PYTHON         the interpreter the venv is made from (default python3)
#
#   swin_torch_enabled        0 unless SWIN_TORCH=0 (exits under CI=true then)
#   swin_venv_ensure          creates or updates the venv; no-op when current
#   swin_venv_python          prints the venv's python

SWIN_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
SWIN_VENV="${SWIN_VENV:-$SWIN_ROOT/build/venv}"
SWIN_REQUIREMENTS=("$SWIN_ROOT/python/requirements-torch.txt" "$SWIN_ROOT/python/constraints-torch.txt")
SWIN_VENV_STAMP_NAME=.swin-opt-requirements

swin_is_ci() {
  [[ "${CI:-}" =~ ^([Tt]rue|TRUE|1|yes)$ ]]
}

swin_torch_enabled() {
  case "${SWIN_TORCH:-1}" in
    0 | false | no | off)
      if swin_is_ci; then
        echo "error: SWIN_TORCH=${SWIN_TORCH} under CI=${CI}: CI must run the PyTorch tests" >&2
        exit 1
      fi
      return 1 ;;
  esac
  return 0
}

swin_venv_python() {
  echo "$SWIN_VENV/bin/python"
}

# The hash of the requirement files.
_swin_venv_stamp() {
  cat "${SWIN_REQUIREMENTS[@]}" | sha256sum | cut -d' ' -f1
}

# True when the venv exists, its python runs and it was installed from the
# current requirement files.
swin_venv_current() {
  local py
  py="$(swin_venv_python)"
  [[ -x "$py" ]] && "$py" -c 'pass' 2>/dev/null &&
    [[ -f "$SWIN_VENV/$SWIN_VENV_STAMP_NAME" ]] &&
    [[ "$(cat "$SWIN_VENV/$SWIN_VENV_STAMP_NAME")" == "$(_swin_venv_stamp)" ]]
}

swin_venv_ensure() {
  swin_venv_current && return 0
  local py start=$SECONDS
  py="$(swin_venv_python)"
  if [[ -e "$SWIN_VENV" ]] && ! { [[ -x "$py" ]] && "$py" -c 'pass' 2>/dev/null; }; then
    # Broken (interpreter gone, half-created): recreate, but never delete
    # something that is not a venv.
    if [[ ! -f "$SWIN_VENV/pyvenv.cfg" ]] && [[ -n "$(ls -A "$SWIN_VENV")" ]]; then
      echo "error: SWIN_VENV=$SWIN_VENV exists and is not a virtual environment" >&2
      return 1
    fi
    rm -rf "$SWIN_VENV"
  fi
  if [[ ! -x "$py" ]]; then
    echo "setup: creating the Python test environment in $SWIN_VENV"
    mkdir -p "$(dirname "$SWIN_VENV")"
    "${PYTHON:-python3}" -m venv "$SWIN_VENV"
  fi
  echo "setup: installing python/requirements-torch.txt into $SWIN_VENV" \
    "(a new venv downloads about 3 GB of wheels; SWIN_TORCH=0 skips it)"
  rm -f "$SWIN_VENV/$SWIN_VENV_STAMP_NAME"
  if ! "$py" -m pip install --prefer-binary --progress-bar off -q \
    -r "${SWIN_REQUIREMENTS[0]}" -c "${SWIN_REQUIREMENTS[1]}"; then
    echo "error: could not install the Python test environment into $SWIN_VENV" \
      "(without network: SWIN_TORCH=0 runs the suite without the torch tests)" >&2
    return 1
  fi
  local versions
  versions="$("$py" -c 'import torch, torchvision, timm, transformers, numpy, pytest as p
print(f"torch {torch.__version__}, torchvision {torchvision.__version__}, timm {timm.__version__},"
      f" transformers {transformers.__version__}, numpy {numpy.__version__}, pytest {p.__version__}")')" || {
    echo "error: the Python test environment in $SWIN_VENV cannot import torch" >&2
    return 1
  }
  _swin_venv_stamp >"$SWIN_VENV/$SWIN_VENV_STAMP_NAME"
  echo "setup: Python test environment ready in $((SECONDS - start)) s: $versions"
}

# The whole-model environment: a second venv layered on the one above (a
# .pth file in it names the torch venv's site-packages, so torch and its
# 5.7 GB are not installed twice) that adds torch-mlir
# (python/requirements-whole-model.txt: the export of whole timm models the
# whole-model tests compile) and, for bench/whole_model.py only, IREE and
# OpenVINO (python/requirements-whole-model-bench.txt). It is made without
# pip of its own (it runs the torch venv's pip, and sees the torch venv's
# setuptools, which torch needs), and is reinstalled when its requirement
# files or the torch venv's change (a stamp records their hash).
#
#   SWIN_WM_VENV=DIR  where it lives (default: build/venv-wm)
#
#   swin_wm_venv_ensure        the torch venv, then this one with torch-mlir
#   swin_wm_bench_venv_ensure  the same, plus IREE and OpenVINO (benchmarks)
#   swin_wm_venv_python        prints its python

SWIN_WM_VENV="${SWIN_WM_VENV:-$SWIN_ROOT/build/venv-wm}"
SWIN_WM_REQUIREMENTS="$SWIN_ROOT/python/requirements-whole-model.txt"
SWIN_WM_BENCH_REQUIREMENTS="$SWIN_ROOT/python/requirements-whole-model-bench.txt"
SWIN_WM_CONSTRAINTS=("$SWIN_ROOT/python/constraints-torch.txt" "$SWIN_ROOT/python/constraints-whole-model.txt")

swin_wm_venv_python() {
  echo "$SWIN_WM_VENV/bin/python"
}

# The hash of what the layer was installed from: the torch venv's stamp and
# path, and the given requirement files with the constraints.
_swin_wm_stamp() {
  { cat "$SWIN_VENV/$SWIN_VENV_STAMP_NAME"; echo "$SWIN_VENV"; cat "$@" "${SWIN_WM_CONSTRAINTS[@]}"; } |
    sha256sum | cut -d' ' -f1
}

# Installs the requirement file $2 into the layer unless its stamp $1 is
# current; $3 is a Python statement that checks the install.
_swin_wm_layer_ensure() {
  local stamp_name=$1 requirements=$2 probe=$3
  shift 3
  local py stamp start=$SECONDS
  py="$(swin_wm_venv_python)"
  stamp="$(_swin_wm_stamp "$@")"
  [[ -x "$py" ]] && [[ -f "$SWIN_WM_VENV/$stamp_name" ]] &&
    [[ "$(cat "$SWIN_WM_VENV/$stamp_name")" == "$stamp" ]] && "$py" -c 'pass' 2>/dev/null && return 0
  if [[ -e "$SWIN_WM_VENV" ]] && [[ ! -f "$SWIN_WM_VENV/pyvenv.cfg" ]] && [[ -n "$(ls -A "$SWIN_WM_VENV")" ]]; then
    echo "error: SWIN_WM_VENV=$SWIN_WM_VENV exists and is not a virtual environment" >&2
    return 1
  fi
  if ! { [[ -x "$py" ]] && "$py" -c 'pass' 2>/dev/null; }; then
    echo "setup: creating the whole-model environment in $SWIN_WM_VENV (on $SWIN_VENV)"
    rm -rf "$SWIN_WM_VENV"
    mkdir -p "$(dirname "$SWIN_WM_VENV")"
    # From the torch venv's interpreter: the same Python underneath.
    "$(swin_venv_python)" -m venv --without-pip "$SWIN_WM_VENV" || return 1
  fi
  # The torch venv's packages after the layer's own (always rewritten: the
  # torch venv may have moved).
  local base layer
  base="$("$(swin_venv_python)" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')" &&
    layer="$("$py" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')" || return 1
  echo "$base" >"$layer/swin-opt-torch-venv.pth"
  echo "setup: installing ${requirements#"$SWIN_ROOT"/} into $SWIN_WM_VENV"
  rm -f "$SWIN_WM_VENV/$stamp_name"
  local constraint constraints=()
  for constraint in "${SWIN_WM_CONSTRAINTS[@]}"; do constraints+=(-c "$constraint"); done
  if ! "$py" -m pip install --prefer-binary --progress-bar off -q -r "$requirements" "${constraints[@]}"; then
    echo "error: could not install ${requirements#"$SWIN_ROOT"/} into $SWIN_WM_VENV" >&2
    return 1
  fi
  local versions
  versions="$("$py" -c "$probe")" || {
    echo "error: the whole-model environment in $SWIN_WM_VENV does not import what it installed" >&2
    return 1
  }
  echo "$stamp" >"$SWIN_WM_VENV/$stamp_name"
  echo "setup: whole-model environment ready in $((SECONDS - start)) s: $versions"
}

swin_wm_venv_ensure() {
  swin_venv_ensure || return 1
  _swin_wm_layer_ensure .swin-opt-wm-requirements "$SWIN_WM_REQUIREMENTS" \
    'import importlib.metadata as m, torch, torch_mlir.fx
print("torch-mlir", m.version("torch-mlir"), "on torch", torch.__version__)' \
    "$SWIN_WM_REQUIREMENTS"
}

swin_wm_bench_venv_ensure() {
  swin_wm_venv_ensure || return 1
  _swin_wm_layer_ensure .swin-opt-wm-bench-requirements "$SWIN_WM_BENCH_REQUIREMENTS" \
    'import importlib.metadata as m, iree.compiler, iree.runtime, openvino, ml_dtypes
print(", ".join(f"{p} {m.version(p)}" for p in ("iree-base-compiler", "iree-base-runtime", "openvino", "ml_dtypes")))' \
    "$SWIN_WM_REQUIREMENTS" "$SWIN_WM_BENCH_REQUIREMENTS"
}
