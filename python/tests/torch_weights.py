"""Weights for the PyTorch model tests.

:func:`sharpen` redraws a model's parameters with larger variances than the
frameworks' inits (bias tables ~ N(0, 1), linear weights ~ N(0, 4/fan_in),
SwinV2 logit scales with ``exp`` in [2, 200]) so that the attention is sharp
and a missing or misplaced bias or mask shows far above the tolerances.
"""

import math


def sharpen(torch, model, seed=0):
    """Redraw ``model``'s parameters in place (seeded); returns it in eval mode."""
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "relative_position_bias_table" in name:
                p.copy_(torch.randn(p.shape, generator=gen))
            elif name.endswith("logit_scale"):  # SwinV2: s_h = exp(.) in [2, 200], clamped at 100
                p.copy_(torch.empty(p.shape).uniform_(math.log(2), math.log(200), generator=gen))
            elif p.dim() == 2:
                p.copy_(torch.randn(p.shape, generator=gen) * (2.0 / p.shape[1] ** 0.5))
            elif "bias" in name:
                p.copy_(torch.randn(p.shape, generator=gen) * 0.5)
            elif p.dim() == 1 and name.endswith("weight") and not p.any():
                # timm's SwinV2 zero-inits the post-norms of the residual
                # branches: the attention would not reach the output at all
                p.fill_(1.0)
    return model.eval()
