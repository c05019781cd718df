"""BEiT's relative position bias handed on as its table: :class:`TableBias`, the
patches of the modules that gather it (:class:`BiasTablePatch`) and what the
attention patches do with it (:class:`TableBiasConsumer`).

In BEiT the bias is gathered outside the attention that adds it: timm's
shared ``beit.RelativePositionBias`` (``use_shared_rel_pos_bias``, passed to
every block as ``shared_rel_pos_bias``), transformers 5's
``BeitRelativePositionBias`` (per layer in ``BeitLayer`` or shared in
``BeitModel``, passed to ``BeitAttention`` as its ``attention_mask``) and
data2vec-vision's copy of it (per layer, inside the self-attention, or
shared in the encoder).  Each returns the table gathered to ``[heads, N, N]``,
which the attention only adds to its scores.  Patched, such a module returns a
:class:`TableBias` instead: which modules' tables the bias is, on which grid,
without gathering anything.  The patched attentions then hand the table (the
sum of the parts' tables when a layer has its own and a shared one: both use
the same index) to the class-token kernels, whose backward gives each table
its gradient (the one shared table sums those of every layer).

Anything else that receives a :class:`TableBias` gets the gathered tensor:
``+`` and every torch function (``__torch_function__``) gather it with the
modules' original forwards, and the attention patches gather it before
their original forward runs (:meth:`TableBiasConsumer.original_args`).
"""

from __future__ import annotations

from typing import NamedTuple, Optional, Tuple

from . import ops
from .fallback import Fallback
from .patching import Patch
from .tracing import trace_constant

try:
    import torch
except ImportError:  # swin_opt.torch imports without PyTorch; its entry points need it
    torch = None

__all__ = ["TableBias", "BiasTablePatch", "TimmBiasTable", "HFBiasTable", "TableBiasConsumer",
           "class_token_table"]


class _Part(NamedTuple):
    """One patched bias module's call: the module, its patch and the call's arguments."""

    patch: "BiasTablePatch"
    module: object
    args: tuple
    kwargs: dict


class TableBias:
    """The relative position bias of one or more BEiT tables, not gathered: what a
    patched bias module returns (the sum of several with ``+``).  :meth:`tensor`
    gathers it with the modules' original forwards, as do ``+`` with a tensor
    and the torch functions it is passed to."""

    def __init__(self, parts: Tuple[_Part, ...]):
        self.parts = parts

    def tensor(self):
        """The bias the original modules return (summed over the parts)."""
        out = None
        for p in self.parts:
            t = p.patch.original(p.module)(*p.args, **p.kwargs)
            out = t if out is None else out + t
        return out

    def __add__(self, other):
        if isinstance(other, TableBias):
            return TableBias(self.parts + other.parts)
        return self.tensor() + other

    def __radd__(self, other):
        return other + self.tensor()

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        return func(*gathered(args), **dict(zip(kwargs or {}, gathered((kwargs or {}).values()))))

    def __repr__(self) -> str:
        return f"<swin_opt TableBias of {len(self.parts)} table(s)>"


def gathered(values) -> list:
    """``values`` with each :class:`TableBias` replaced by its tensor."""
    return [v.tensor() if isinstance(v, TableBias) else v for v in values]


class BiasTablePatch(Patch):
    """``forward`` of a module that gathers BEiT's bias from its table: returns a
    :class:`TableBias` of the call (counted as a kernel call: the table went on
    as a table).  Subclasses say which grid the call asks for and its index."""

    kind = "bias"

    def run(self, m, *args, **kwargs):
        if torch.jit.is_scripting() or torch.jit.is_tracing():
            raise Fallback("scripting/tracing")
        return TableBias((_Part(self, m, args, kwargs),))

    def not_gathered(self, m, args, kwargs) -> Optional[str]:
        """Why the call's bias is not the module's table gathered on the grid it was
        learned for (``m.window_size``), or None when it is."""
        raise NotImplementedError  # pragma: no cover

    def index_ok(self, m, window) -> bool:
        """Whether the module's relative position index of ``window`` is BEiT's
        (:func:`.ops.index_ok`, a trace constant)."""
        raise NotImplementedError  # pragma: no cover


class TimmBiasTable(BiasTablePatch):
    """timm's ``beit.RelativePositionBias.forward()`` (``use_shared_rel_pos_bias``):
    the table of its own ``window_size``, its ``relative_position_index``."""

    framework = "timm"

    def not_gathered(self, m, args, kwargs):
        return None

    def index_ok(self, m, window):
        return ops.index_ok(m.relative_position_index, window, True)


class HFBiasTable(BiasTablePatch):
    """transformers' ``BeitRelativePositionBias.forward(window_size,
    interpolate_pos_encoding=False, dim_size=None)`` and data2vec-vision's copy:
    the table (learned for ``m.window_size``) bilinearly resized to the
    ``window_size`` of the call, whose result ``interpolate_pos_encoding``
    resizes again to ``dim_size`` tokens.  Both resizes are the identity when the
    grid is the table's and square, the only case the kernels take."""

    framework = "transformers"

    def not_gathered(self, m, args, kwargs):
        names = ("window_size", "interpolate_pos_encoding", "dim_size")
        given = dict(zip(names, args), **kwargs)
        window = tuple(int(w) for w in given["window_size"])
        learned = tuple(int(w) for w in m.window_size)
        if window != learned:
            return f"the bias table of the {learned} grid is interpolated to the {window} grid"
        if learned[0] != learned[1]:
            # it reshapes the table's (2Wh-1)(2Ww-1) rows as (2Ww-1, 2Wh-1) and
            # resizes that to (2Wh-1, 2Ww-1): on a non-square grid, a resampling
            return (f"transformers resamples the bias table of the non-square {learned} grid "
                    "(height and width swapped in its reshape)")
        dim_size = given.get("dim_size")
        if (given.get("interpolate_pos_encoding") and dim_size is not None
                and int(dim_size) != learned[0] * learned[1] + 1):
            return f"the bias is interpolated to {int(dim_size)} tokens"
        return None

    def index_ok(self, m, window):
        # the index is computed, not a buffer: under torch.compile it would be a
        # graph tensor, so it is generated and checked at trace time
        return _generated_index_ok(type(m), window)


@trace_constant
def _generated_index_ok(cls, window) -> bool:
    """Whether ``cls.generate_relative_position_index(window)`` (transformers' BEiT
    bias modules) is BEiT's index: a :func:`~.tracing.trace_constant`."""
    return ops.index_ok(cls.generate_relative_position_index(tuple(window)), window, True)


def class_token_table(patch, bias: TableBias, n: int, heads: int, dtype):
    """``(window, table)``: the grid of an attention over ``n`` tokens (the grid and
    a class token) and the one ``[T + 3, heads]`` table of ``bias`` (its parts'
    tables, each checked once against its index, summed), or Fallback where a
    part's bias is not its table gathered (BEiT at another resolution:
    :meth:`BiasTablePatch.not_gathered`) or the grid is not that of ``n`` tokens."""
    window, table = None, None
    for part in bias.parts:
        why = part.patch.not_gathered(part.module, part.args, part.kwargs)
        if why is not None:
            raise Fallback(why)
        learned = tuple(int(w) for w in part.module.window_size)
        if window is not None and learned != window:
            raise Fallback(f"bias tables of the {window} and {learned} grids")
        window = learned
        patch.check_once(("bias index", id(part.module), window),
                         lambda: part.patch.index_ok(part.module, window),
                         "relative_position_index is not BEiT's index")
        t = patch.table(part.module.relative_position_bias_table, window, heads, None, dtype,
                        class_token=True)
        table = t if table is None else table + t
    if window is None or n != window[0] * window[1] + 1:
        raise Fallback(f"{n} tokens, not the {window} grid and a class token")
    return window, table


class TableBiasConsumer:
    """A mixin of the attention patches that take a :class:`TableBias`: their
    original forward, where they fall back, gets the gathered bias."""

    def original_args(self, args, kwargs):
        return tuple(gathered(args)), dict(zip(kwargs, gathered(kwargs.values())))
