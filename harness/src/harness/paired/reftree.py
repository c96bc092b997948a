"""The two sides of an A/B run: the git ref checked out beside the working tree, each side with a twin environment.

``prepare_sides`` keeps everything under a cache directory (``.benchmarks/ab`` by default) and reuses it:

- ``<cache>/treeA``: a clone sharing the repository's objects (``git clone --shared``, alternates, nothing copied), in
  which the ref is checked out (``git checkout --force --detach``, then ``git clean -ffdx``). A clone rather than
  ``git worktree add`` writes nothing into the repository's own ``.git`` (no worktree admin files or locks to prune)
  and sees every commit of the repository at once;
- ``<cache>/treeB``: a symbolic link to the working tree, so both sides import their code through paths of the same
  length;
- both trees' packages byte-compiled before the workers start (``compileall``), so neither side compiles at import;
- ``<cache>/runA/<n>`` and ``<cache>/runB/<n>``: the (empty) working directories of the workers of process pair n.
  A process that starts in the link would see the working tree's real path as its current directory (``getcwd``
  resolves links), and ``python -m`` puts that directory first on ``sys.path``, so the two sides would again differ
  in a path's length; each side's pytest configuration is then named explicitly (``Side.config``);
- ``<cache>/envA`` and ``<cache>/envB``: virtual environments of the running interpreter holding each tree's packages
  (editable installs, the packages the running environment has in editable form) and exactly the third-party versions
  of the running environment, so the two sides differ only in our code. Each is rebuilt when that list, its tree's
  package metadata (``pyproject.toml``) or the interpreter changes (a stamp file records them). Their identical
  shared objects are hard links to one file (``_share_libraries``), so both sides map the same pages.

Why twins: where a process keeps its objects and buffers follows from everything it allocated before, down to the
length of each module's path. Measured on the 2-core reference VM with the B side run from the working tree's own
environment, the same code on both sides differed by up to 4.5% (a 1 MiB alloc/free, 4 KiB copies) and 2.3x (a
1 MiB copy whose source and destination fell 4 KiB apart in one process only); twin paths leave the layout to the code.

A repository none of whose packages is installed editable (benchmarks that are plain test files) needs no
environments: both sides run their trees' tests with the running interpreter.

Errors (no git, an unknown ref, a failed install) raise RefError with what failed and the command's output.
"""

from __future__ import annotations

import filecmp
import functools
import hashlib
import json
import os
import re
import shutil
import stat
import subprocess
import sys
import venv
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlparse
from urllib.request import url2pathname

import pytest
from _pytest.config.findpaths import load_config_dict_from_file  # pytest's own reading of a config file

__all__ = ["RefError", "Side", "Sides", "default_ref", "prepare_sides", "pytest_config"]

_MAIN_BRANCHES = ("main", "origin/main", "master", "origin/master")
_TEXT_MAX_BYTES = 1 << 20  # a larger file of an environment is a library or data, linked as it is
_NAME_ENDS = rb"(?![\w.+~-])"  # what may follow a path in a file without continuing its last component


class RefError(RuntimeError):
    """The ref could not be resolved, checked out or given an environment."""


@dataclass(frozen=True)
class Side:
    """One side of an A/B run: the tree its tests run in (``root``), its interpreter, the working directory of its
    worker (``workdir``), its tree's pytest configuration file (``config``; None without one), and where the working
    tree's paths are in that tree (``inside``)."""

    root: Path
    python: Path
    top: Path
    workdir: Path
    config: Path | None

    def workdir_of(self, pair: int) -> Path:
        """The working directory of this side's worker of process pair ``pair`` (``<workdir>/<pair>``, created): each
        worker has its own, so a benchmark that writes a file into its current directory collides with nobody."""
        path = self.workdir / str(pair)
        path.mkdir(parents=True, exist_ok=True)
        return path

    def inside(self, path: Path) -> Path:
        """Where ``path`` of the working tree is in this side's tree. Raises RefError for a path outside the working
        tree."""
        try:
            return self.root / path.resolve().relative_to(self.top)
        except ValueError:
            raise RefError(f"{str(path)!r} is outside the repository {str(self.top)!r}: the ref has no copy of it") from None


@dataclass(frozen=True)
class Sides:
    """The ref as given (``ref``), its commit ``sha``, side A (the ref) and side B (the working tree: ``b_commit`` is
    its HEAD, ``b_dirty`` whether it has uncommitted changes, ``branch`` its branch or '')."""

    ref: str
    sha: str
    a: Side
    b: Side
    b_commit: str = ""
    b_dirty: bool = False
    branch: str = ""
    shared_interpreter: bool = False  # no editable install: both sides import the packages this interpreter has

    def commit_infos(self) -> tuple[dict[str, object], dict[str, object]]:
        """The ``commit_info`` of the A and the B run file: each side's commit, named as the user gave it (the
        workers' own git look-up would see the repository that holds the cache, i.e. the working tree's HEAD)."""
        a = {"id": self.sha, "ref": self.ref, "dirty": False, "branch": ""}
        b = {"id": self.b_commit, "ref": "working tree", "dirty": self.b_dirty, "branch": self.branch}
        return a, b


def _git(*args: str, cwd: Path | None = None) -> str:
    try:
        done = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, check=False)
    except OSError as exc:
        raise RefError(f"cannot run git ({exc}): A/B mode needs git on PATH") from None
    if done.returncode != 0:
        raise RefError(f"git {' '.join(args)} failed: {done.stderr.strip() or done.stdout.strip()}")
    return done.stdout.strip()


def default_ref(baseline_commit: str | None) -> str:
    """The merge base of HEAD with the main branch (the first of main, origin/main, master, origin/master that
    exists); when that is HEAD itself (on the main branch), ``baseline_commit`` (the stored baseline's commit).
    Raises RefError when neither gives a commit other than HEAD."""
    head = _git("rev-parse", "HEAD")
    for branch in _MAIN_BRANCHES:
        try:
            base = _git("merge-base", "HEAD", branch)
        except RefError:
            continue
        if base != head:
            return base
        break
    if baseline_commit and baseline_commit != head:
        return baseline_commit
    raise RefError("no ref to compare with: HEAD is on the main branch (or there is none) and no stored baseline names "
                   "another commit; pass one, e.g. --against HEAD~1")


def prepare_sides(ref: str, cache: Path, progress: Callable[[str], None]) -> Sides:
    """Check ``ref`` out in ``cache/treeA``, link ``cache/treeB`` to the working tree, and make both environments fit
    their trees (see the module doc)."""
    top = Path(_git("rev-parse", "--show-toplevel")).resolve()
    try:
        sha = _git("rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}")
    except RefError:
        raise RefError(f"unknown git ref {ref!r}: not a branch, tag or commit of {top} (a remote branch may need "
                       f"`git fetch`; `git branch -a` lists the branches)") from None
    cache = cache.resolve()
    tree_a, tree_b = cache / "treeA", cache / "treeB"
    if not (tree_a / ".git").exists():
        cache.mkdir(parents=True, exist_ok=True)
        progress(f"harness bench: cloning the repository into {tree_a} (objects shared, nothing copied)")
        _git("clone", "--quiet", "--shared", "--no-checkout", str(top), str(tree_a))
    _git("checkout", "--quiet", "--force", "--detach", sha, cwd=tree_a)
    _git("clean", "-ffdxq", cwd=tree_a)
    if not (tree_b.is_symlink() and tree_b.resolve() == top):
        tree_b.unlink(missing_ok=True)
        tree_b.symlink_to(top, target_is_directory=True)
    workdirs = [cache / "runA", cache / "runB"]
    for workdir in workdirs:
        workdir.mkdir(exist_ok=True)
    editable, pinned = _running_packages(top)
    if not editable:
        progress("harness bench: warning: no package of this repository is installed editable in this interpreter: "
                 "both sides import the packages it has (the same code on A and B), only the benchmark files differ; "
                 "`nox -s bench` installs them editable, so that each side runs its own tree's code")
        pythons = [Path(sys.executable)] * 2
    else:
        python_a = _environment(tree_a, cache / "envA", editable, pinned, progress)
        python_b = _environment(tree_b, cache / "envB", editable, pinned, progress, twin=(tree_a, cache / "envA"))
        pythons = [python_a, python_b]
        for python, tree in zip(pythons, (tree_a, tree_b)):
            _precompile(python, tree, editable)
        _share_libraries(cache / "envA", cache / "envB", progress)
    a, b = (Side(tree, python, top, workdir, pytest_config(tree))
            for tree, python, workdir in zip((tree_a, tree_b), pythons, workdirs))
    dirty = bool(_git("status", "--porcelain", cwd=top))  # untracked files count: a new benchmark runs on B
    branch = _git("rev-parse", "--abbrev-ref", "HEAD", cwd=top)
    return Sides(ref, sha, a, b, _git("rev-parse", "HEAD", cwd=top), dirty, "" if branch == "HEAD" else branch,
                 shared_interpreter=not editable)


# the files pytest looks for in a directory, in its order (pytest >= 9 also reads pytest.toml and .pytest.toml; an
# older pytest finds no configuration in them, as its own discovery does not)
_PYTEST_CONFIGS = ("pytest.toml", ".pytest.toml", "pytest.ini", ".pytest.ini", "pyproject.toml", "tox.ini", "setup.cfg")


def pytest_config(root: Path) -> Path | None:
    """The file pytest would read its configuration from in directory ``root``, or None: the first of
    ``_PYTEST_CONFIGS`` that exists and that pytest's own loader (``_pytest.config.findpaths``, the one its rootdir
    discovery uses) finds a configuration in, e.g. a pyproject.toml only with ``[tool.pytest]`` or
    ``[tool.pytest.ini_options]``. A file pytest cannot read (bad TOML, a ``[pytest]`` section in setup.cfg) is
    returned too, so that the worker's pytest reports the error, as a plain run in the tree would."""
    for name in _PYTEST_CONFIGS:
        path = root / name
        if not path.is_file():
            continue
        try:
            if load_config_dict_from_file(path) is not None:
                return path
        except (Exception, pytest.fail.Exception):
            return path
    return None


def _environment(tree: Path, env: Path, editable: list[str], pinned: list[str], progress: Callable[[str], None],
                 twin: tuple[Path, Path] | None = None) -> Path:
    """``env``'s interpreter, (re)built to hold ``tree``'s editable packages and the ``pinned`` distributions. With
    ``twin`` = (its tree, its environment), already built: when that environment holds the same packages (same
    stamp), ``env`` is made as its copy (``_copy_environment``) instead of installing everything again."""
    packages = [path for path in editable if (tree / path / "pyproject.toml").exists()]
    metadata = [(tree / path / "pyproject.toml").read_bytes() for path in packages]
    stamp = hashlib.sha256(json.dumps([sys.version, packages, pinned]).encode() + b"".join(metadata)).hexdigest()
    python = env / "bin" / "python"
    stamp_file = env / "harness-stamp"
    if python.exists() and _stamp_of(env) == stamp:
        return python
    if twin is not None and _stamp_of(twin[1]) == stamp and _copy_environment(twin, (tree, env), progress):
        stamp_file.unlink()  # a link to the twin's: written anew, not through the link
        stamp_file.write_text(stamp + "\n")
        return python
    if twin is None and _copy_running(tree, env, packages, progress):
        stamp_file.unlink(missing_ok=True)  # as above, should the running environment have one
        stamp_file.write_text(stamp + "\n")
        return python
    progress(f"harness bench: building {env} for {tree} (once per change of its packages)")
    venv.EnvBuilder(clear=True, with_pip=True).create(env)
    requirements = env / "requirements.txt"
    requirements.write_text("\n".join(pinned) + "\n")
    command = [str(python), "-m", "pip", "install", "--progress-bar", "off", "--disable-pip-version-check", "-r",
               str(requirements)]
    for path in packages:
        command += ["-e", str(tree / path)]
    _pip(command, f"installing {tree}'s packages into {env}", progress)
    _through(tree, env)
    stamp_file.write_text(stamp + "\n")
    return python


def _stamp_of(env: Path) -> str | None:
    """The stamp ``_environment`` wrote into ``env`` when it was built, or None."""
    try:
        return (env / "harness-stamp").read_text().strip()
    except (OSError, UnicodeDecodeError):  # missing, a directory, or garbage: rebuild
        return None


def _copy_environment(source: tuple[Path, Path], target: tuple[Path, Path], progress: Callable[[str], None]) -> bool:
    """Make ``target``'s environment a copy of ``source``'s, given each as (tree, environment): every file a hard link
    to the source's (so both sides map the same library files, as ``_share_libraries`` wants) except those that name
    the source's environment or tree, which are written anew with the target's names, byte for byte in place (the
    names have the same length, so even compiled files stay valid). A pip install of the same packages takes about a
    minute here; this takes seconds. Returns False, leaving ``target`` removed, when the names' lengths differ or a
    file cannot be copied (the caller then installs)."""
    if any(len(str(old)) != len(str(new)) for old, new in zip(source, target)):
        return False
    progress(f"harness bench: making {target[1]} a copy of {source[1]} (the same packages; paths renamed)")
    return _copy_tree(source[1], target[1], _Renamer(dict(zip(source, target)), binary=True), progress)


def _copy_running(tree: Path, env: Path, packages: list[str], progress: Callable[[str], None]) -> bool:
    """Make ``env`` a copy of the running virtual environment when ``tree``'s packages have the same metadata as the
    running tree's (byte-identical ``pyproject.toml``: pip would install the same distributions): every file a hard
    link, except the text files that name the running environment or tree (scripts, ``.pth`` files, editable
    finders, ``direct_url.json``), written with ``env``'s and ``tree``'s names. A compiled file that names them keeps
    the old name in its tracebacks only. Seconds instead of a pip install of every dependency (150 s here). Returns
    False, leaving ``env`` removed, when the running interpreter is not in a virtual environment, the metadata
    differ, or a file cannot be copied (the caller then installs)."""
    running, top = Path(sys.prefix).resolve(), Path(_git("rev-parse", "--show-toplevel")).resolve()
    if running == Path(sys.base_prefix).resolve() or running.is_relative_to(env.resolve()) \
            or env.resolve().is_relative_to(running):
        return False
    try:
        if any(not filecmp.cmp(tree / path / "pyproject.toml", top / path / "pyproject.toml", shallow=False)
               for path in packages):
            return False
    except OSError:  # a package of the ref's tree that the working tree does not have
        return False
    progress(f"harness bench: making {env} a copy of the running environment {running} (the same packages)")
    # the tree's name with its separator: the environment may lie inside the tree, and only whole names move
    renamer = _Renamer({running: env, Path(f"{top}{os.sep}"): Path(f"{tree}{os.sep}")}, binary=False)
    return _copy_tree(running, env, renamer, progress)


@dataclass(frozen=True)
class _Renamer:
    """Old names -> new names, replaced in one pass (a new name may contain an old one); ``binary``: in every file
    (the names have equal lengths), else in text files only (no NUL byte, at most ``_TEXT_MAX_BYTES``)."""

    names: dict[Path, Path]
    binary: bool

    @functools.cached_property
    def _table(self) -> tuple[dict[bytes, bytes], re.Pattern[bytes]]:
        """The names as bytes, and one pattern of them all, longest first (built once, used for every file)."""
        new = {os.fsencode(str(old)): os.fsencode(str(to)) for old, to in self.names.items()}
        # a whole name only: /x/v must not match in /x/v2 (a name ending in a separator is whole by itself)
        return new, re.compile(b"|".join(re.escape(old) + (b"" if old.endswith(os.sep.encode()) else _NAME_ENDS)
                                         for old in sorted(new, key=len, reverse=True)))

    def __call__(self, data: bytes) -> bytes | None:
        """``data`` renamed, or None when it names nothing (or is a file this renamer leaves alone)."""
        if not self.binary and b"\0" in data:
            return None
        new, pattern = self._table
        return pattern.sub(lambda match: new[match.group(0)], data) if pattern.search(data) else None


def _copy_tree(src: Path, dst: Path, rename: _Renamer, progress: Callable[[str], None]) -> bool:
    """Copy environment ``src`` to ``dst`` entry by entry (``_copy_entry``); False, leaving ``dst`` removed, when an
    entry cannot be copied."""
    shutil.rmtree(dst, ignore_errors=True)
    try:
        for folder, dirs, files in os.walk(src):
            here = dst / Path(folder).relative_to(src)
            here.mkdir(exist_ok=True)
            for name in dirs + files:
                _copy_entry(Path(folder) / name, here / name, rename)
    except OSError as exc:
        progress(f"harness bench: copying {src} failed ({exc}); installing instead")
        shutil.rmtree(dst, ignore_errors=True)
        return False
    return True


def _copy_entry(src: Path, dst: Path, rename: _Renamer) -> None:
    """One entry of ``_copy_tree``: a link re-pointed, a folder left to the walk, a file that names the old paths
    written renamed, anything else hard-linked."""
    if src.is_symlink():
        target = os.fsencode(os.readlink(src))
        os.symlink(os.fsdecode(rename(target) or target), dst)
        return
    if src.is_dir():
        return
    info = src.stat()
    if not stat.S_ISREG(info.st_mode):  # a FIFO or socket: nothing a package needs, and reading one may block
        return
    data = src.read_bytes() if rename.binary or info.st_size <= _TEXT_MAX_BYTES else b"\0"
    renamed = rename(data)
    if renamed is not None:
        dst.write_bytes(renamed)
        shutil.copymode(src, dst)
        return
    try:
        os.link(src, dst)
    except OSError:
        shutil.copy2(src, dst)


def _pip(command: list[str], what: str, progress: Callable[[str], None]) -> None:
    """Run a pip ``command``, saying each package it collects and what it installed (a build takes minutes: the
    user sees it move); RefError with pip's last output when it fails."""
    lines: list[str] = []
    with subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True) as pip:
        for line in pip.stdout or ():
            lines.append(line.rstrip())
            if line.startswith(("Collecting", "Successfully installed")):
                progress(f"  pip: {line.strip()[:160]}")
    if pip.returncode != 0:
        raise RefError(f"{what} failed:\n" + "\n".join(lines[-40:])[-4000:])


def _precompile(python: Path, tree: Path, editable: list[str]) -> None:
    """Byte-compile ``tree``'s packages with ``python`` (``compileall``; up-to-date files are skipped) before the
    workers start, so both sides import cached bytecode: the freshly cleaned ref tree would otherwise compile every
    module at import, which leaves its worker's (and its servers') heap laid out differently from the other side's.
    A failure (a syntax error in the tree) is left for the import to report."""
    dirs = [str(tree / path) for path in editable if (tree / path).is_dir()]
    if dirs:
        subprocess.run([str(python), "-m", "compileall", "-q", *dirs], capture_output=True, check=False)


def _share_libraries(env_a: Path, env_b: Path, progress: Callable[[str], None]) -> int:
    """Hard-link every shared object (``*.so``, ``*.so.*``) of ``env_b``'s site-packages that is byte for byte the one
    at the same place in ``env_a`` to that file, so both sides map the same file, whose pages sit in the page cache
    once: where a library's code and tables lie in physical memory decides which of them compete for a cache set, and
    two copies of numpy's libraries are two such placements (measured: ``numpy.empty`` 6.5% apart between the two
    environments on all three process pairs of one run). Returns how many files were linked; a file that cannot be
    linked (another file system, no permission) stays as it is, said in one progress line."""
    linked, failed = 0, []
    roots = env_a.resolve(), env_b.resolve()
    for path_a in sorted(env_a.glob("lib/python*/site-packages/**/*.so*")):
        path_b = env_b / path_a.relative_to(env_a)
        if not _SHARED_OBJECT.fullmatch(path_a.name) or not _inside(path_a, roots[0]) or not _inside(path_b, roots[1]):
            continue
        try:
            a, b = path_a.lstat(), path_b.lstat()
            if not (stat.S_ISREG(a.st_mode) and stat.S_ISREG(b.st_mode)) or (a.st_dev, a.st_ino) == (b.st_dev, b.st_ino):
                continue
            if a.st_size != b.st_size or not filecmp.cmp(path_a, path_b, shallow=False):
                continue
            temp = path_b.with_name(f".{path_b.name}.harness-link")
            temp.unlink(missing_ok=True)
            os.link(path_a, temp)
            os.replace(temp, path_b)
        except OSError as exc:
            failed.append(f"{path_b.name}: {exc.strerror or exc}")
            continue
        linked += 1
    if failed:
        progress(f"harness bench: {len(failed)} shared object(s) of {env_b} could not be linked to {env_a}'s and stay "
                 f"copies, so the two sides may differ by where their libraries lie ({failed[0]})")
    return linked


_SHARED_OBJECT = re.compile(r".+\.so(\.\d+)*")  # libfoo.so, _ext.cpython-311-x86_64-linux-gnu.so, libbar.so.1.2


def _inside(path: Path, root: Path) -> bool:
    """True when ``path``'s directory, links resolved, lies under ``root``: a linked directory of one environment
    must not lead the linking into a tree outside it."""
    return path.parent.resolve().is_relative_to(root)


def _through(tree: Path, env: Path) -> None:
    """Make the editable installs of ``env`` name their sources through ``tree`` even when it is a symbolic link
    (pip's build backends write the resolved path into their ``.pth`` files), so both sides' paths have one length."""
    real = str(tree.resolve())
    if real == str(tree):
        return
    for pth in env.glob("lib/python*/site-packages/*.pth"):
        lines = pth.read_text(encoding="utf-8").splitlines()
        moved = [str(tree) + line[len(real):] if line == real or line.startswith(real + os.sep) else line
                 for line in lines]
        if moved != lines:
            pth.write_text("\n".join(moved) + "\n", encoding="utf-8")


def _running_packages(top: Path) -> tuple[list[str], list[str]]:
    """(paths relative to ``top`` of the packages installed editable from it, ``name==version`` of every other
    installed distribution) in the running environment."""
    from importlib import metadata  # noqa: PLC0415 - only A/B mode needs it

    editable, pinned = [], []
    for dist in metadata.distributions():
        name = dist.metadata["Name"]
        url = _editable_url(dist)
        if url is not None:
            path = Path(url2pathname(urlparse(url).path)).resolve()  # installed through a link to the tree
            if path.is_relative_to(top):
                editable.append(str(path.relative_to(top)))
                continue
        if name and dist.version:
            pinned.append(f"{name}=={dist.version}")
    return sorted(set(editable)), sorted(set(pinned), key=str.lower)


def _editable_url(dist: object) -> str | None:
    """The source URL of an editable install (PEP 610 ``direct_url.json``), else None."""
    text = dist.read_text("direct_url.json")  # type: ignore[attr-defined]
    if not text:
        return None
    info = json.loads(text)
    return info.get("url") if info.get("dir_info", {}).get("editable") else None
