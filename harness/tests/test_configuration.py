"""Configuration is declared once per package: docs/configuration.md matches the declarations, its examples run,
and no module but a package's configuration module reads the environment."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from harness.config_doc import BEGIN, END, main, render, replace_section

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "configuration.md"
SOURCES = {"runtime-core": ROOT / "packages/runtime-core/src", "runtime-backends": ROOT / "packages/runtime-backends/src",
           "harness": ROOT / "harness/src", "mock-gpu": ROOT / "mock_gpu/src"}
CONFIG_MODULES = {"runtime_core/config.py", "harness/config.py", "mock_gpu/config.py"}
# the A/B worker runs inside the tree under test, whose harness may predate harness.config: it reads its channel itself
OWN_READERS = {"harness/paired/worker.py"}


def test_the_doc_lists_exactly_the_declared_variables():
    text = DOC.read_text(encoding="utf-8")
    generated = text[text.index(BEGIN):text.index(END) + len(END)]
    assert generated == render(), "regenerate it: python -m harness.config_doc --write docs/configuration.md"


def test_every_example_of_the_doc_runs(monkeypatch):
    blocks = re.findall(r"```python\n(.*?)```", DOC.read_text(encoding="utf-8"), flags=re.S)
    assert len(blocks) >= 2
    monkeypatch.delenv("MOCKGPU", raising=False)
    for i, code in enumerate(blocks):
        exec(compile(code, f"docs/configuration.md example {i + 1}", "exec"), {})


def test_the_writer_replaces_only_the_marked_section(tmp_path):
    doc = tmp_path / "c.md"
    doc.write_text(f"intro\n{BEGIN}\nold\n{END}\noutro\n")
    assert main(["--write", str(doc)]) == 0
    assert doc.read_text() == f"intro\n{render()}\noutro\n"
    with pytest.raises(ValueError, match="no .* section"):
        replace_section("no markers", "x")


def _reads_environ(tree: ast.AST) -> bool:
    parents = {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "os":
            parent = parents.get(node)
            written = isinstance(parent, ast.Subscript) and isinstance(parent.ctx, (ast.Store, ast.Del))
            if node.attr == "getenv" or (node.attr == "environ" and not written):
                return True
    return False


@pytest.mark.parametrize("package", list(SOURCES))
def test_only_the_configuration_module_reads_the_environment(package):
    src = SOURCES[package]
    readers = {p.relative_to(src).as_posix() for p in src.rglob("*.py") if _reads_environ(ast.parse(p.read_text()))}
    assert readers - CONFIG_MODULES - OWN_READERS == set()
