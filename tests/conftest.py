"""Shared fixtures: the smoke-profile policy is loaded once per test session."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parent.parent
if str(REPO_ROOT) not in sys.path:  # for `import tools.notebooks`
    sys.path.insert(0, str(REPO_ROOT))


@pytest.fixture(scope="session")
def smoke_profile():
    from grpo_core.profiles import get_profile

    return get_profile("smoke")


@pytest.fixture(scope="session")
def smoke_policy(smoke_profile):
    """``(model, tokenizer)`` of the offline model; converts it on the first run (~30 s)."""
    from grpo_core.models import load_policy

    return load_policy(smoke_profile)
