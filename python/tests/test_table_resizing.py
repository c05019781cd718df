"""Fine-tuning at another window or image size: the relative position bias table
resized by the framework's own checkpoint loader (timm's ``checkpoint_filter_fn``:
``resize_rel_pos_bias_table``, bicubic, for Swin and MaxViT; the class-token
variant for BEiT) is an ordinary table of the new window, and the swapped model
runs the new window's kernel on it.

Each case builds a small random model, loads its weights into a model of
another window (or image size, for BEiT's global attention) through timm's
loader, and checks that the table was resampled (its shape changed) and that
the swapped model computes what the resized original does (1e-4 relative, as
test_torch.py), every attention layer on a kernel.
"""

from __future__ import annotations

import pytest

from swin_opt import torch as st
from swin_opt.testing import sharpen_weights

pytestmark = pytest.mark.aot

RTOL = 1e-4

_SWIN = dict(patch_size=4, embed_dim=32, depths=(2,), num_heads=(2,), num_classes=5)
_MAXVIT = dict(embed_dim=(16, 16), depths=(1, 1), stem_width=16, transformer_dim_head=8,
               num_classes=5)
_BEIT = dict(patch_size=8, embed_dim=32, depth=2, num_heads=4, num_classes=5)

#: family -> (timm model, module with checkpoint_filter_fn, trained-at config, fine-tuned config)
CASES = {
    # window 4 -> 6 (the tables 7x7 -> 11x11), 24x24 -> 24x24 map
    "swin": ("swin_tiny_patch4_window7_224", "timm.models.swin_transformer",
             dict(_SWIN, img_size=96, window_size=4), dict(_SWIN, img_size=96, window_size=6)),
    # partitions 4x4 -> 2x2 on a 64 -> 32 image
    "maxvit": ("maxvit_nano_rw_256", "timm.models.maxxvit",
               dict(_MAXVIT, img_size=64, transformer_window_size=4, transformer_grid_size=4),
               dict(_MAXVIT, img_size=32, transformer_window_size=2, transformer_grid_size=2)),
    # BEiT: a 4x4 -> 6x6 patch grid (32 -> 48 pixels), the class token's three rows kept
    "beit": ("beit_base_patch16_224", "timm.models.beit",
             dict(_BEIT, img_size=32), dict(_BEIT, img_size=48)),
}


def _tables(model):
    return {name: p for name, p in model.named_parameters()
            if name.endswith("relative_position_bias_table")}


@pytest.mark.parametrize("family", sorted(CASES))
def test_resized_table_runs_the_new_windows_kernel(torch, opts, family):
    timm = pytest.importorskip("timm")
    import importlib

    arch, module, trained_cfg, tuned_cfg = CASES[family]
    torch.manual_seed(0)
    trained = sharpen_weights(timm.create_model(arch, pretrained=False, **trained_cfg), seed=1)
    tuned = timm.create_model(arch, pretrained=False, **tuned_cfg)
    loader = importlib.import_module(module).checkpoint_filter_fn
    tuned.load_state_dict(loader(trained.state_dict(), tuned), strict=False)
    tuned.eval()
    old, new = _tables(trained), _tables(tuned)
    assert old and sorted(old) == sorted(new)
    for name in old:  # resampled to the new window, not copied or left at its init
        assert old[name].shape != new[name].shape, name
        assert new[name].abs().max() > 0.5, name
    size = tuned_cfg["img_size"]
    x = torch.randn(2, 3, size, size, generator=torch.Generator().manual_seed(2))
    with torch.inference_mode():
        want = tuned(x)
    assert st.swap_attention(tuned, **opts) > 0
    with torch.inference_mode():
        got = tuned(x)
    assert ((got - want).abs().max() / want.abs().max()).item() <= RTOL
    # one kernel call per table (MaxViT's partition patches call for their attention)
    attention = [s for s in st.patch_stats(tuned) if s["kind"] == "attention"]
    assert sum(s["kernel_calls"] for s in attention) == len(new), attention
    assert not any(s["fallback_calls"] for s in attention), attention
