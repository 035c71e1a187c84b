"""Fixtures every test module may ask for. Helpers the tests share live in tests/support/."""

import numpy as np
import pytest


@pytest.fixture
def rng():
    return np.random.default_rng(1234)
