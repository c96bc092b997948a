"""The A/B sides: the file pytest itself would pick in a tree's root (``pytest_config``), the twin environments' shared
libraries (``_share_libraries``) and one environment made as a copy of the other (``_copy_environment``)."""

from __future__ import annotations

import os
import stat
import sys
from pathlib import Path

import pytest

from harness.paired import reftree
from harness.paired.reftree import _copy_environment, _copy_running, _share_libraries, pytest_config


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


def test_identical_shared_objects_of_the_two_environments_become_one_file(tmp_path: Path) -> None:
    site = "lib/python3.11/site-packages"
    files = {"numpy/core/_umath.cpython-311-x86_64-linux-gnu.so": (b"\x7fELF same", b"\x7fELF same"),
             "numpy.libs/libopenblas.so.0": (b"blas", b"blas"),
             "ours/_ext.so": (b"built from tree A", b"built from tree B"),  # differs: left alone
             "numpy/__init__.py": (b"same", b"same")}  # not mapped by the loader: left alone
    for name, contents in files.items():
        for env, content in zip(("envA", "envB"), contents):
            path = tmp_path / env / site / name
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(content)
    lines: list[str] = []
    assert _share_libraries(tmp_path / "envA", tmp_path / "envB", lines.append) == 2
    same = {name: (tmp_path / "envA" / site / name).samefile(tmp_path / "envB" / site / name) for name in files}
    assert same == {"numpy/core/_umath.cpython-311-x86_64-linux-gnu.so": True, "numpy.libs/libopenblas.so.0": True,
                    "ours/_ext.so": False, "numpy/__init__.py": False}
    assert (tmp_path / "envB" / site / "ours/_ext.so").read_bytes() == b"built from tree B" and lines == []
    assert _share_libraries(tmp_path / "envA", tmp_path / "envB", lines.append) == 0  # already shared: nothing to do


def test_only_libraries_inside_both_environments_are_linked(tmp_path: Path) -> None:
    site = "lib/python3.11/site-packages"
    for env in ("envA", "envB"):
        (tmp_path / env / site / "pkg").mkdir(parents=True)
        (tmp_path / env / site / "pkg" / "notes.sorted.txt").write_bytes(b"same")  # not a library by its name
    outside = tmp_path / "elsewhere" / "ext"
    outside.mkdir(parents=True)
    (outside / "e.so").write_bytes(b"ext")
    (tmp_path / "envA" / site / "ext").mkdir()
    (tmp_path / "envA" / site / "ext" / "e.so").write_bytes(b"ext")
    (tmp_path / "envB" / site / "ext").symlink_to(outside)  # envB's directory leads out of envB
    (tmp_path / "envA" / site / "pkg" / "gone.so").write_bytes(b"x")
    (tmp_path / "envB" / site / "pkg" / "gone.so").mkdir()  # a directory where envA has a file
    lines: list[str] = []
    assert _share_libraries(tmp_path / "envA", tmp_path / "envB", lines.append) == 0
    assert not (outside / "e.so").samefile(tmp_path / "envA" / site / "ext" / "e.so") and lines == []
    assert not (tmp_path / "envA" / site / "pkg" / "notes.sorted.txt").samefile(
        tmp_path / "envB" / site / "pkg" / "notes.sorted.txt")


def _twin_source(cache: Path) -> dict[str, bytes]:
    """A fake built environment ``cache/envA`` for tree ``cache/treeA``: its files by relative path."""
    env, tree = cache / "envA", cache / "treeA"
    files = {"bin/pip": b"#!" + bytes(env) + b"/bin/python\nimport pip\n",
             "pyvenv.cfg": b"command = python -m venv " + bytes(env) + b"\n",
             "lib/site-packages/_editable_ours.pth": bytes(tree) + b"/src\n",
             "lib/site-packages/ours.pyc": b"\xe3\x00marshal\x10" + bytes(tree) + b"/src/ours.py\x00",  # length kept
             "lib/site-packages/numpy/_umath.so": b"\x7fELF no path here",
             "harness-stamp": b"stamp\n"}
    for name, data in files.items():
        (env / name).parent.mkdir(parents=True, exist_ok=True)
        (env / name).write_bytes(data)
    (env / "bin/pip").chmod(0o755)
    (env / "bin/python3").symlink_to(env / "bin/python")  # an absolute link into the environment
    (env / "lib64").symlink_to("lib")
    return files


def test_an_environment_is_copied_with_its_paths_renamed_and_the_rest_linked(tmp_path: Path) -> None:
    files = _twin_source(tmp_path)
    lines: list[str] = []
    source, target = (tmp_path / "treeA", tmp_path / "envA"), (tmp_path / "treeB", tmp_path / "envB")
    assert _copy_environment(source, target, lines.append)
    env_b = tmp_path / "envB"
    for name, data in files.items():
        want = data.replace(bytes(tmp_path / "envA"), bytes(env_b)).replace(bytes(tmp_path / "treeA"),
                                                                           bytes(tmp_path / "treeB"))
        assert (env_b / name).read_bytes() == want, name
        assert (env_b / name).samefile(tmp_path / "envA" / name) == (want == data), name  # untouched files: one file
    assert stat.S_IMODE((env_b / "bin/pip").stat().st_mode) == 0o755
    assert os.readlink(env_b / "bin/python3") == str(env_b / "bin/python") and os.readlink(env_b / "lib64") == "lib"
    assert (tmp_path / "envA/pyvenv.cfg").read_bytes() == files["pyvenv.cfg"]  # the source is left as it was
    assert len(lines) == 1 and "copy" in lines[0]


def test_names_of_other_lengths_are_not_copied(tmp_path: Path) -> None:
    _twin_source(tmp_path)
    assert not _copy_environment((tmp_path / "treeA", tmp_path / "envA"), (tmp_path / "tree_B", tmp_path / "envB"),
                                 lambda _: None)
    assert not (tmp_path / "envB").exists()


def test_the_ref_s_environment_is_a_copy_of_the_running_one_with_its_names_changed(tmp_path: Path,
                                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    top, running, tree, env = tmp_path / "top", tmp_path / "top/.venv", tmp_path / "cache/treeA", tmp_path / "cache/envA"
    for root in (top, tree):
        (root / "pkg").mkdir(parents=True)
        (root / "pkg/pyproject.toml").write_text("[project]\nname = 'pkg'\n")
    files = {"bin/pip": b"#!" + bytes(running) + b"/bin/python\n",
             "lib/site-packages/_pkg.pth": bytes(top) + b"/pkg/src\n",
             "lib/site-packages/pkg.dist-info/direct_url.json": b'{"url": "file://' + bytes(top) + b'/pkg"}',
             "lib/site-packages/mod.pyc": b"\xe3\x00" + bytes(running) + b"/lib/mod.py\x00",  # binary: linked as is
             "lib/site-packages/numpy/core.so": b"\x7fELF"}
    for name, data in files.items():
        (running / name).parent.mkdir(parents=True, exist_ok=True)
        (running / name).write_bytes(data)
    (running / "bin/python").symlink_to("/usr/bin/python3")
    monkeypatch.setattr(sys, "prefix", str(running))
    monkeypatch.setattr(sys, "base_prefix", "/usr")
    monkeypatch.setattr(reftree, "_git", lambda *args, cwd=None: str(top))
    lines: list[str] = []
    assert _copy_running(tree, env, ["pkg"], lines.append)
    assert (env / "bin/pip").read_bytes() == b"#!" + bytes(env) + b"/bin/python\n"
    assert (env / "lib/site-packages/_pkg.pth").read_bytes() == bytes(tree) + b"/pkg/src\n"
    assert bytes(tree) + b"/pkg" in (env / "lib/site-packages/pkg.dist-info/direct_url.json").read_bytes()
    for name in ("lib/site-packages/mod.pyc", "lib/site-packages/numpy/core.so"):
        assert (env / name).samefile(running / name)
    assert os.readlink(env / "bin/python") == "/usr/bin/python3" and len(lines) == 1
    # other package metadata, or a package the working tree does not have: pip must install what the ref's tree says
    (tree / "pkg/pyproject.toml").write_text("[project]\nname = 'pkg'\ndependencies = ['x']\n")
    assert not _copy_running(tree, env, ["pkg"], lines.append)
    (tree / "other").mkdir()
    (tree / "other/pyproject.toml").write_text("[project]\nname = 'other'\n")
    assert not _copy_running(tree, env, ["other"], lines.append)


def test_a_name_is_renamed_only_where_it_is_whole(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # the environment /x/v beside the repository /x/v2: /x/v must not be renamed inside /x/v2/...; a FIFO is skipped
    top, running, tree, env = tmp_path / "v2", tmp_path / "v", tmp_path / "v2/cache/treeA", tmp_path / "v2/cache/envA"
    for root in (top, tree):
        (root / "pkg").mkdir(parents=True)
        (root / "pkg/pyproject.toml").write_text("[project]\nname = 'pkg'\n")
    (running / "lib").mkdir(parents=True)
    (running / "lib/_pkg.pth").write_bytes(bytes(top) + b"/pkg/src\n" + bytes(running) + b"/lib\n")
    os.mkfifo(running / "lib/fifo")
    monkeypatch.setattr(sys, "prefix", str(running))
    monkeypatch.setattr(sys, "base_prefix", "/usr")
    monkeypatch.setattr(reftree, "_git", lambda *args, cwd=None: str(top))
    assert _copy_running(tree, env, ["pkg"], lambda _: None)
    assert (env / "lib/_pkg.pth").read_bytes() == bytes(tree) + b"/pkg/src\n" + bytes(env) + b"/lib\n"
    assert not (env / "lib/fifo").exists()
