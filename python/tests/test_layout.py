"""The package's module layout: imports run downward only, and torch is optional.

Every import of a ``swin_opt`` module by another -- at module level or inside
a function, relative or absolute -- is read from the source with :mod:`ast`;
the modules must form a DAG, in the order :data:`LAYERS` lists them (each
imports only modules listed before it: the order the package docstrings
give). ``import swin_opt`` and its NumPy path must not import torch, and
``swin_opt.torch`` must import without torch installed.
"""

from __future__ import annotations

import ast
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Dict, Set

PACKAGE = Path(__file__).resolve().parents[1] / "swin_opt"

#: Every module of the package, lowest first.
LAYERS = [
    "swin_opt.errors",
    "swin_opt.dtypes",
    "swin_opt.geometry",
    "swin_opt.abi",
    "swin_opt.reference",
    "swin_opt.config",
    "swin_opt.log",
    "swin_opt.tools",
    "swin_opt.cache",
    "swin_opt.kernel",
    "swin_opt.gpu_kernel",
    "swin_opt.cuda_toolkit",
    "swin_opt.build",
    "swin_opt.cuda",
    "swin_opt.testing",
    "swin_opt.linear_mlir",
    "swin_opt.dense",
    "swin_opt",
    "swin_opt.__main__",
    "swin_opt.export_mlir",
    "swin_opt.whole_model",
    "swin_opt.torch.tracing",
    "swin_opt.torch.fallback",
    "swin_opt.torch.tensors",
    "swin_opt.torch.masks",
    "swin_opt.torch.attention_math",
    "swin_opt.torch.ops",
    "swin_opt.torch.dense",
    "swin_opt.torch.projections",
    "swin_opt.torch.patching",
    "swin_opt.torch.windows",
    "swin_opt.torch.table_bias",
    "swin_opt.torch.timm_patches",
    "swin_opt.torch.maxvit_patches",
    "swin_opt.torch.torchvision_patches",
    "swin_opt.torch.monai_patches",
    "swin_opt.torch.transformers_patches",
    "swin_opt.torch.mlp",
    "swin_opt.torch.linears",
    "swin_opt.torch.swap",
    "swin_opt.torch.warmup",
    "swin_opt.torch",
]


def _modules() -> Dict[str, Path]:
    out = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = ("swin_opt",) + path.relative_to(PACKAGE).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = path
    return out


def _imports(name: str, path: Path, modules: Dict[str, Path]) -> Set[str]:
    """The package's modules that ``name`` imports anywhere in its source. ``from P
    import x`` imports module ``P.x`` when that is a module, else (a name of P's
    ``__init__``) P itself; importing a submodule runs its packages' ``__init__``
    first, which is Python's and not counted."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names if alias.name in modules)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[:len(base) - node.level + 1]
                source = ".".join(base + ([node.module] if node.module else []))
            else:
                source = node.module or ""
            if source not in modules:
                continue
            for alias in node.names:
                sub = f"{source}.{alias.name}"
                found.add(sub if sub in modules else source)
    found.discard(name)
    return found


def test_layers_list_every_module():
    assert sorted(LAYERS) == sorted(_modules())


def test_imports_run_downward():
    modules = _modules()
    rank = {name: i for i, name in enumerate(LAYERS)}
    upward = []
    for name, path in modules.items():
        for target in sorted(_imports(name, path, modules)):
            if rank[target] >= rank[name]:
                upward.append(f"{name} imports {target}")
    assert not upward, "imports that do not run downward (or form a cycle):\n" + \
        "\n".join(upward)


def test_the_import_reader_sees_every_form(tmp_path):
    """The reader above must see relative, absolute and function-level imports, or
    the layout test could not fail."""
    modules = {"swin_opt": PACKAGE / "__init__.py", "swin_opt.a": tmp_path / "a.py",
               "swin_opt.b": tmp_path / "b.py", "swin_opt.c": tmp_path / "c.py",
               "swin_opt.torch": PACKAGE / "torch" / "__init__.py",
               "swin_opt.torch.d": tmp_path / "d.py"}
    (tmp_path / "a.py").write_text(textwrap.dedent("""\
        from . import b
        from .c import name
        import swin_opt.torch.d

        def f():
            from swin_opt import compile
            from .torch import d
        """))
    assert _imports("swin_opt.a", tmp_path / "a.py", modules) == {
        "swin_opt.b", "swin_opt.c", "swin_opt.torch.d", "swin_opt"}
    (tmp_path / "d.py").write_text("from .. import b\nfrom ..c import x\nfrom . import e\n")
    assert _imports("swin_opt.torch.d", tmp_path / "d.py", modules) == {
        "swin_opt.b", "swin_opt.c", "swin_opt.torch"}


def _python(code: str, *, block_torch: bool = False, tmp_path=None) -> str:
    """Run ``code`` in a fresh interpreter with ``python/`` on the path (and, with
    ``block_torch``, a ``torch`` that cannot be imported); returns its stdout."""
    path = [str(PACKAGE.parent)]
    if block_torch:
        blocker = tmp_path / "no-torch" / "torch"
        blocker.mkdir(parents=True)
        (blocker / "__init__.py").write_text('raise ImportError("torch is blocked by the test")\n')
        path.insert(0, str(blocker.parent))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(path))
    proc = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], env=env,
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def test_import_swin_opt_does_not_import_torch():
    out = _python("""
        import sys
        import numpy as np
        import swin_opt, swin_opt.cuda, swin_opt.testing, swin_opt.__main__
        import swin_opt.export_mlir
        swin_opt.make_config((7, 7), 3, 32, resolution=(14, 14), shift=3)
        print(sorted(m for m in sys.modules if m == "torch" or m.startswith("torch.")))
        """)
    assert out.strip() == "[]"


def test_torch_package_imports_without_torch(tmp_path):
    out = _python("""
        import numpy as np
        import swin_opt.torch as st
        from swin_opt import reference as ref
        import swin_opt.torch.warmup, swin_opt.torch.ops
        mask = ref.shift_mask((14, 14), (7, 7), 3)
        print(st.match_shift_mask(mask, (7, 7)))
        try:
            st.swap_attention(object())
        except ImportError as exc:
            print(exc)
        """, block_torch=True, tmp_path=tmp_path)
    assert out.splitlines() == ["((14, 14), (3, 3))",
                                "swin_opt.torch needs PyTorch (pip install torch)"]
