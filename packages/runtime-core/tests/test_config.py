"""runtime_core.config: every variable parsed one way, a bad value an error naming the variable."""

from __future__ import annotations

import pytest

from runtime_core import config
from runtime_core.config import CLOUD_TIMEOUT, CPU_THREADS, MOCKGPU, RUNTIME_LRU_MAX_BYTES, SETTINGS, ConfigError


@pytest.mark.parametrize("text, value", [("1", True), ("true", True), ("TRUE", True), (" yes ", True), ("On", True),
                                         ("0", False), ("false", False), ("no", False), ("OFF", False)])
def test_a_flag_takes_the_usual_boolean_words(monkeypatch, text, value):
    monkeypatch.setenv("MOCKGPU", text)
    assert MOCKGPU.get() is value


@pytest.mark.parametrize("text", ["2", "maybe", "1.0", "y"])
def test_a_flag_refuses_anything_else_naming_the_variable(monkeypatch, text):
    monkeypatch.setenv("MOCKGPU", text)
    with pytest.raises(ConfigError, match=rf"^MOCKGPU='{text}': expected a boolean"):
        MOCKGPU.get()


@pytest.mark.parametrize("text", [None, "", "   "])
def test_unset_or_empty_is_the_default(monkeypatch, text):
    if text is None:
        monkeypatch.delenv("RUNTIME_LRU_MAX_BYTES", raising=False)
    else:
        monkeypatch.setenv("RUNTIME_LRU_MAX_BYTES", text)
    assert RUNTIME_LRU_MAX_BYTES.get() == 1 << 30


@pytest.mark.parametrize("setting, text, value", [(CPU_THREADS, " 4 ", 4), (RUNTIME_LRU_MAX_BYTES, "0", 0),
                                                  (CLOUD_TIMEOUT, "0.5", 0.5)])
def test_numbers_parse(monkeypatch, setting, text, value):
    monkeypatch.setenv(setting.name, text)
    assert setting.get() == value


@pytest.mark.parametrize("setting, text", [(CPU_THREADS, "0"), (CPU_THREADS, "1.5"), (RUNTIME_LRU_MAX_BYTES, "-1"),
                                           (CLOUD_TIMEOUT, "0"), (CLOUD_TIMEOUT, "inf"), (CLOUD_TIMEOUT, "nan")])
def test_bad_numbers_are_errors_naming_the_variable(monkeypatch, setting, text):
    monkeypatch.setenv(setting.name, text)
    with pytest.raises(ConfigError, match=rf"^{setting.name}='{text}': expected"):
        setting.get()


def test_a_command_line_option_can_share_the_parser():
    with pytest.raises(ConfigError, match="^--threads='x': expected an integer >= 1"):
        CPU_THREADS.parse("x", source="--threads")


def test_every_setting_is_declared_once_with_a_doc():
    names = [s.name for s in SETTINGS]
    assert len(names) == len(set(names))
    for s in SETTINGS:
        assert s.doc and "\n" not in s.doc and s.shown_default()
    exported = {getattr(config, n).name for n in config.__all__ if isinstance(getattr(config, n), config.Setting)}
    assert exported == set(names) - {config.DEVICE_FLAG_NAME}


def test_the_device_flag_of_any_backend(monkeypatch):
    monkeypatch.setenv("TOY", "yes")
    assert config.device_flag("TOY") is True
    monkeypatch.setenv("TOY", "please")
    with pytest.raises(ConfigError, match="TOY='please'"):
        config.device_flag("TOY")
