"""The A/B sides' pytest configuration: the file pytest itself would pick in a tree's root (``pytest_config``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.paired.reftree import pytest_config


@pytest.mark.parametrize(("files", "chosen"), [
    ({"pyproject.toml": "[tool.pytest.ini_options]\naddopts = '-ra'\n", "tox.ini": "[pytest]\n"}, "pyproject.toml"),
    ({"pyproject.toml": "[project]\nname = 'x'\n", "tox.ini": "[pytest]\n"}, "tox.ini"),  # no pytest section in it
    ({"pytest.ini": "", "pyproject.toml": "[tool.pytest.ini_options]\n"}, "pytest.ini"),  # an empty pytest.ini counts
    ({"setup.cfg": "[tool:pytest]\n", "tox.ini": "[tox]\n"}, "setup.cfg"),
    ({"pyproject.toml": "[project]\n", "setup.cfg": "[metadata]\n"}, None),
    ({"pytest.toml": "[pytest]\naddopts = ['-x']\n", "tox.ini": "[pytest]\n"}, "pytest.toml"),  # pytest >= 9
    ({"pyproject.toml": "[tool.pytest]\naddopts = ['-x']\n", "tox.ini": "[pytest]\n"}, "pyproject.toml"),  # TOML mode
    ({"pyproject.toml": "# was [tool.pytest.ini_options]\n[project]\n", "tox.ini": "[pytest]\n"}, "tox.ini"),
    ({"tox.ini": "[tox]\n# no [pytest] section\n", "setup.cfg": "[tool:pytest]\n"}, "setup.cfg"),
    ({"pyproject.toml": "[tool.pytest.ini_options\n", "tox.ini": "[pytest]\n"}, "pyproject.toml"),  # pytest reports it
])
def test_the_config_is_the_one_pytest_would_read(tmp_path: Path, files: dict[str, str], chosen: str | None) -> None:
    for name, text in files.items():
        (tmp_path / name).write_text(text, encoding="utf-8")
    assert pytest_config(tmp_path) == (tmp_path / chosen if chosen else None)
