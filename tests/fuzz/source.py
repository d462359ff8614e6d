"""Where a case generator's choices come from: a seeded NumPy generator (the campaign driver) or
Hypothesis draws (shrinkable). Array contents always come from a NumPy generator seeded by one
drawn integer, so Hypothesis shrinks the structure of a case, not thousands of floats."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


class RandomSource:
    """Choices from a NumPy generator: ``RandomSource.for_case(seed, index)`` is reproducible."""

    def __init__(self, rng: np.random.Generator):
        self.rng = rng

    @classmethod
    def for_case(cls, seed: int, index: int) -> RandomSource:
        return cls(np.random.default_rng([seed, index]))

    def int(self, lo: int, hi: int) -> int:
        """An integer in [lo, hi] (inclusive)."""
        return int(self.rng.integers(lo, hi + 1))

    def choice(self, options: Sequence):
        return options[int(self.rng.integers(len(options)))]

    def prob(self, p: float) -> bool:
        return bool(self.rng.random() < p)

    def seed(self) -> int:
        return int(self.rng.integers(2**31))


class HypothesisSource:
    """Choices drawn from Hypothesis ``st.data()``; every draw shrinks towards the plain case."""

    def __init__(self, data):
        from hypothesis import strategies as st

        self._st = st
        self.data = data

    def int(self, lo: int, hi: int) -> int:
        return self.data.draw(self._st.integers(lo, hi))

    def choice(self, options: Sequence):
        return options[self.data.draw(self._st.integers(0, len(options) - 1))]

    def prob(self, p: float) -> bool:
        # Shrinks towards 0, i.e. towards False ("no fault", "no special values").
        return self.data.draw(self._st.integers(0, 999)) >= 1000 - int(p * 1000)

    def seed(self) -> int:
        return self.data.draw(self._st.integers(0, 2**31 - 1))
