"""$MOCKGPU picks the driver module in one place, parsed like every boolean: true works, a typo fails loudly."""

from __future__ import annotations

import pytest

import mock_gpu.driver
from runtime_backends.cuda.driver import driver_module
from runtime_core.config import ConfigError


@pytest.mark.parametrize("value", ["1", "true", "TRUE", "yes", "on"])
def test_any_true_word_selects_the_emulated_driver(monkeypatch, value):
    monkeypatch.setenv("MOCKGPU", value)
    assert driver_module() is mock_gpu.driver


@pytest.mark.parametrize("value", ["2", "mock", "ture"])
def test_anything_else_is_an_error_naming_the_variable_not_the_real_driver(monkeypatch, value):
    monkeypatch.setenv("MOCKGPU", value)
    with pytest.raises(ConfigError, match=f"^MOCKGPU='{value}': expected a boolean"):
        driver_module()
