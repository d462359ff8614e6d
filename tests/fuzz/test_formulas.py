"""The fuzzer's independent oracle (tests/fuzz/formulas.py) agrees with the project's NumPy
references on every named sample of the op table: two statements of docs/operators.md, written
apart, that must say the same where both apply."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from tests.fuzz import formulas
from tests.op_table import OPS, present

FAMILY = [op for op in OPS if op.name in formulas.FORMULAS]


def _params():
    return [pytest.param(op, s, id=f"{op.name}-{s.id}") for op in FAMILY for s in op.samples()]


@pytest.mark.parametrize("op,sample", _params())
def test_formulas_agree_with_the_references(op, sample):
    expected = op.spec.reference(*[sample.inputs.get(n) for n in op.spec.INPUT_NAMES], **sample.attrs)
    got, _ = formulas.evaluate(op.name, present(sample.inputs), sample.attrs)
    assert len(got) == len(expected)
    for name, g, e in zip(op.spec.OUTPUT_NAMES, got, expected):
        g, e = np.asarray(g), np.asarray(e)
        assert g.dtype == e.dtype and g.shape == e.shape, (name, g.dtype, e.dtype, g.shape, e.shape)
        if g.dtype.kind == "f" or g.dtype == ml_dtypes.bfloat16:
            np.testing.assert_allclose(g.astype(np.float64), e.astype(np.float64), rtol=op.rtol, atol=op.atol,
                                       err_msg=name)
        else:
            np.testing.assert_array_equal(g, e, err_msg=name)
