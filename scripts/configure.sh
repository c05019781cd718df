# Sourced by setup.sh and fuzz.sh: configures a build directory of swin-opt
# against LLVM/MLIR 22 from Debian's packages (clang-22, lld, ccache), once.
#
#   swin_configure BUILD_DIR [CMAKE_ARGUMENTS...]
swin_configure() {
  local build_dir="$1"
  shift
  local llvm_prefix=/usr/lib/llvm-22
  local root
  root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
  [[ -f "$build_dir/build.ninja" ]] && return 0
  cmake -G Ninja -S "$root" -B "$build_dir" \
    -DMLIR_DIR="$llvm_prefix/lib/cmake/mlir" \
    -DLLVM_EXTERNAL_LIT="$llvm_prefix/bin/lit" \
    -DCMAKE_C_COMPILER="$llvm_prefix/bin/clang" \
    -DCMAKE_CXX_COMPILER="$llvm_prefix/bin/clang++" \
    -DLLVM_USE_LINKER=lld \
    -DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache \
    "$@" >/dev/null
}
