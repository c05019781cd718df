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
