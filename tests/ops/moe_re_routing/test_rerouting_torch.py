"""torch.ops.npu.npu_moe_re_routing: CPU implementation, fake kernel, opcheck and validation."""

from __future__ import annotations

import re

import numpy as np
import pytest
import torch
from torch._subclasses.fake_tensor import FakeTensorMode

from ascend_moe_onnx import exporters  # noqa: F401  (defines the op)
from ascend_moe_onnx.onnx_schemas import moe_re_routing as spec
from tests.ops.moe_re_routing.rerouting_cases import (
    WORKED_COUNTS,
    assert_outputs_same,
    random_bits,
    random_counts,
    run_torch,
)

OP = torch.ops.npu.npu_moe_re_routing


def test_schema_is_torch_npus():
    schema = str(OP.default._schema)
    assert schema.startswith("npu::npu_moe_re_routing(Tensor tokens, Tensor expert_token_num_per_rank, *, "
                             "Tensor? per_token_scales=None, int expert_token_num_type=1, int idx_type=0)")
    assert len(OP.default._schema.returns) == 4


@pytest.mark.parametrize("token_type", spec.TOKEN_TYPES)
def test_every_token_type_matches_the_reference(token_type):
    rng = np.random.default_rng(5)
    A = 31
    tokens = random_bits(rng, (A, 9), token_type)
    counts = random_counts(rng, 4, 3, A)
    scales = random_bits(rng, (A, 2), "bfloat16")
    for attrs in ({}, {"idx_type": 1, "expert_token_num_type": 0}):
        assert_outputs_same(run_torch(tokens, counts, scales, **attrs),
                            spec.reference(tokens, counts, scales, **attrs), token_type)


@pytest.mark.parametrize("args, kwargs", [
    ((torch.randn(6, 4), torch.tensor(WORKED_COUNTS)), {}),
    ((torch.randn(6, 4, dtype=torch.bfloat16), torch.tensor(WORKED_COUNTS, dtype=torch.int32)),
     {"per_token_scales": torch.rand(6), "idx_type": 1}),
    ((torch.randint(-128, 127, (6, 3), dtype=torch.int8), torch.tensor(WORKED_COUNTS)),
     {"per_token_scales": torch.rand(6, 2, dtype=torch.float16), "expert_token_num_type": 0}),
    ((torch.zeros(0, 5, dtype=torch.uint8), torch.zeros(3, 2, dtype=torch.int64)),
     {"per_token_scales": torch.zeros(0)}),
], ids=["float", "bf16_scales", "int8_scales2d", "empty"])
def test_opcheck(args, kwargs):
    # (float8 tokens cannot go through opcheck: its schema check compares with allclose, which
    # torch does not implement for float8; test_every_token_type covers them.)
    torch.library.opcheck(OP, args, kwargs)


@pytest.mark.parametrize("scales_shape", [None, (7,), (7, 3)])
def test_fake_kernel_shapes(scales_shape):
    with FakeTensorMode():
        tokens = torch.empty(7, 5, dtype=torch.float8_e4m3fn)
        counts = torch.empty(2, 4, dtype=torch.int32)
        scales = None if scales_shape is None else torch.empty(scales_shape, dtype=torch.bfloat16)
        pt, ps, idx, etn = OP(tokens, counts, per_token_scales=scales)
    assert pt.shape == (7, 5) and pt.dtype == torch.float8_e4m3fn
    if scales_shape is None:
        assert ps.shape == (0,) and ps.dtype == torch.float32
    else:
        assert ps.shape == scales_shape and ps.dtype == torch.bfloat16
    assert idx.shape == (7,) and idx.dtype == torch.int32
    assert etn.shape == (4,) and etn.dtype == torch.int32


def test_fake_kernel_checks_ranks_and_types():
    with FakeTensorMode():
        with pytest.raises(ValueError, match=re.escape("input 'tokens' must be 2-D [A, H], got shape [7]")):
            OP(torch.empty(7), torch.empty(2, 4, dtype=torch.int64))
        with pytest.raises(ValueError, match=re.escape("'expert_token_num_per_rank' must be int32 or int64, got float")):
            OP(torch.empty(7, 2), torch.empty(2, 4))


