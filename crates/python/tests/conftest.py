"""Shared paths and helpers of the package's tests (numpy and pytest only)."""

import os
import shutil
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[3]
FIXTURES = ROOT / "tests" / "fixtures"


def fixture(path: str) -> np.ndarray:
    return np.load(FIXTURES / path)


@pytest.fixture
def fx():
    return fixture


def command_binary():
    """The `monomorph` command built beside the package (target/release), if any."""
    env = os.environ.get("MONOMORPH_BIN")
    if env:
        return env
    p = ROOT / "target" / "release" / "monomorph"
    if p.exists():
        return str(p)
    return shutil.which("monomorph")
