# -*- Python -*-
# lit configuration of the swin-opt test suite.

import os

import lit.formats
from lit.llvm import llvm_config
from lit.llvm.subst import ToolSubst

config.name = "SWIN"
config.test_format = lit.formats.ShTest(not llvm_config.use_lit_shell)
config.suffixes = [".mlir", ".test"]
config.excludes = ["Inputs", "CMakeLists.txt", "lit.cfg.py", "lit.site.cfg.py"]
config.test_source_root = os.path.dirname(__file__)
config.test_exec_root = os.path.join(config.swin_obj_root, "test")

config.substitutions.append(("%PATH%", config.environment["PATH"]))
config.substitutions.append(("%shlibext", ".so"))
config.substitutions.append(("%llvm_lib_dir", config.llvm_lib_dir))
config.substitutions.append(("%cuda_toolkit", config.cuda_toolkit))
config.substitutions.append(("%python", config.python_executable))
config.substitutions.append(("%swin_src_root", config.swin_src_root))
config.substitutions.append(("%swin_obj_root", config.swin_obj_root))
# Shared libraries mlir-runner needs for printing and OpenMP.
config.substitutions.append(
    (
        "%runner_libs",
        ",".join(
            os.path.join(config.llvm_lib_dir, lib)
            for lib in (
                "libmlir_runner_utils.so",
                "libmlir_c_runner_utils.so",
                "libomp.so",
            )
        ),
    )
)

llvm_config.with_system_environment(["HOME", "INCLUDE", "LIB", "TMP", "TEMP"])
llvm_config.use_default_substitutions()

# Sanitized builds: the tools are instrumented, mlir-runner JIT-loads
# uninstrumented code; leak checking of the LLVM tools is not ours to fix.
if config.sanitizers:
    # allow_user_poisoning=0: libMLIR.so is not instrumented, and LLVM's
    # BumpPtrAllocator poisons slabs from our (instrumented) inline copies
    # that libMLIR's copies later hand out (see scripts/fuzz.sh).
    config.environment["ASAN_OPTIONS"] = (
        "detect_leaks=1:abort_on_error=0:allow_user_poisoning=0"
    )
    config.environment["UBSAN_OPTIONS"] = "print_stacktrace=1:halt_on_error=1"
    config.available_features.add("sanitizers")

if os.path.exists(os.path.join(config.cuda_toolkit, "include", "cuda.h")):
    config.available_features.add("cuda-headers")

ptxas = os.path.join(config.cuda_toolkit, "bin", "ptxas")
if os.path.exists(ptxas):
    config.available_features.add("ptxas")
    config.substitutions.append(("%ptxas", ptxas))

# The execution tests run the NumPy reference with the configured Python,
# which need not be the one running lit.
import subprocess

if (
    subprocess.run(
        [config.python_executable, "-c", "import numpy"], capture_output=True
    ).returncode
    == 0
):
    config.available_features.add("numpy")

config.excludes.append("Inputs")
tool_dirs = [config.swin_tools_dir, config.llvm_tools_dir]
llvm_config.with_environment("PATH", config.llvm_tools_dir, append_path=True)
tools = ["swin-opt", "swin-aot", "mlir-runner", "mlir-translate", "llc", "mlir-opt", "llvm-nm"]
llvm_config.add_tool_substitutions(tools, tool_dirs)
# The reference checker and the NumPy reference of the python/ package.
config.environment["PYTHONPATH"] = os.path.join(config.swin_src_root, "python")
