"""Main job until the model suite exists: export a small router module that calls
MoeGatingTopKHash, run it in ONNX Runtime with the custom-op library at several token counts, and
print how well it agrees with torch."""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

import numpy as np
import onnxruntime as ort
import torch

import ort_custom_ops
from exporters import export


class Router(torch.nn.Module):
    """DeepSeek-V3-style router (sigmoid, bias, 8 groups keep 4, top-2 group score, rsf 2.5)."""

    def __init__(self, hidden: int = 64, experts: int = 64, k: int = 8):
        super().__init__()
        self.k = k
        self.gate = torch.nn.Linear(hidden, experts, bias=False)
        self.register_buffer("e_score_correction_bias", torch.randn(experts) * 0.1)

    def forward(self, h):
        y, idx, _ = torch.ops.custom.npu_moe_gating_top_k(
            self.gate(h), self.k, bias=self.e_score_correction_bias, k_group=4, group_count=8,
            group_select_mode=1, norm_type=1, routed_scaling_factor=2.5)
        return y, idx


def main() -> int:
    torch.manual_seed(0)
    model = Router().eval()
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "router.onnx"
        export(model, (torch.randn(4, 64),), path,
               dynamic_shapes=({0: torch.export.Dim("tokens")},), input_names=["h"])
        session = ort.InferenceSession(str(path), ort_custom_ops.session_options(),
                                       providers=["CPUExecutionProvider"])
        ok = True
        print(f"{'tokens':>7} {'index agreement':>16} {'max abs err':>12}  result")
        for tokens in (1, 7, 128, 1000):
            h = torch.randn(tokens, 64)
            with torch.no_grad():
                y_t, idx_t = model(h)
            y_o, idx_o = session.run(None, {"h": h.numpy()})
            agree = float(np.mean(idx_o == idx_t.numpy()))
            err = float(np.abs(y_o - y_t.numpy()).max())
            passed = agree == 1.0 and err < 1e-5
            ok &= passed
            print(f"{tokens:>7} {agree:>16.4f} {err:>12.2e}  {'ok' if passed else 'FAIL'}")
    print("MoeGatingTopKHash: ONNX Runtime agrees with torch" if ok else "MISMATCH")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
