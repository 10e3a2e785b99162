from pathlib import Path

import pytest

from invoicekit.settings import Settings, load_settings

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def settings() -> Settings:
    """The settings the application would run with here: the environment and the project's .env."""
    return load_settings(ROOT)


@pytest.fixture
def plain_settings() -> Settings:
    """The defaults, whatever the environment says."""
    return load_settings(None, environ={})
