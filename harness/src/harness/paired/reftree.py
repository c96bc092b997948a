"""The other side of an A/B run: a git ref checked out beside the working tree, with an environment of its own.

``prepare_ref`` keeps both under a cache directory (``.benchmarks/ab`` by default) and reuses them:

- ``<cache>/tree``: a clone sharing the repository's objects (``git clone --shared``, alternates, nothing copied), in
  which the ref is checked out (``git checkout --force --detach``, then ``git clean -ffdx``). A clone rather than
  ``git worktree add`` writes nothing into the repository's own ``.git`` (no worktree admin files or locks to prune)
  and sees every commit of the repository at once;
- ``<cache>/env``: a virtual environment of the running interpreter holding the ref's packages (editable installs from
  ``<cache>/tree``, the same packages the running environment has in editable form) and exactly the third-party
  versions of the running environment, so the two sides differ only in our code. It is rebuilt when that list, the
  ref's package metadata (``pyproject.toml``) or the interpreter changes (a stamp file records them). A repository
  none of whose packages is installed editable (benchmarks that are plain test files) needs no environment: the ref's
  tests run from its tree with the running interpreter.

Errors (no git, an unknown ref, a failed install) raise RefError with what failed and the command's output.
"""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
import venv
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlparse
from urllib.request import url2pathname

__all__ = ["RefError", "RefTree", "default_ref", "prepare_ref"]

_MAIN_BRANCHES = ("main", "origin/main", "master", "origin/master")


class RefError(RuntimeError):
    """The ref could not be resolved, checked out or given an environment."""


@dataclass(frozen=True)
class RefTree:
    """A checked-out ref: ``ref`` as given, its commit ``sha``, the tree ``root``, the environment's ``python``, and
    the working tree's top directory ``top`` it was taken from."""

    ref: str
    sha: str
    root: Path
    python: Path
    top: Path

    def inside(self, path: Path) -> Path:
        """Where ``path`` of the working tree is in the ref's tree. Raises RefError for a path outside the working
        tree."""
        try:
            return self.root / path.resolve().relative_to(self.top)
        except ValueError:
            raise RefError(f"{str(path)!r} is outside the repository {str(self.top)!r}: the ref has no copy of it") from None


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


def prepare_ref(ref: str, cache: Path, progress: Callable[[str], None]) -> RefTree:
    """Check ``ref`` out in ``cache/tree`` and make ``cache/env`` fit it (see the module doc)."""
    top = Path(_git("rev-parse", "--show-toplevel"))
    sha = _git("rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}")
    cache = cache.resolve()
    tree = cache / "tree"
    if not (tree / ".git").exists():
        cache.mkdir(parents=True, exist_ok=True)
        progress(f"harness bench: cloning the repository into {tree} (objects shared, nothing copied)")
        _git("clone", "--quiet", "--shared", "--no-checkout", str(top), str(tree))
    _git("checkout", "--quiet", "--force", "--detach", sha, cwd=tree)
    _git("clean", "-ffdxq", cwd=tree)
    python = _environment(top, tree, cache / "env", progress)
    return RefTree(ref, sha, tree, python, top)


def _environment(top: Path, tree: Path, env: Path, progress: Callable[[str], None]) -> Path:
    editable, pinned = _running_packages(top)
    packages = [path for path in editable if (tree / path / "pyproject.toml").exists()]
    if not packages:
        progress("harness bench: no package of this repository is installed editable here, so the ref's tests run "
                 "from its tree with this interpreter")
        return Path(sys.executable)
    metadata = [(tree / path / "pyproject.toml").read_bytes() for path in packages]
    stamp = hashlib.sha256(json.dumps([sys.version, packages, pinned]).encode() + b"".join(metadata)).hexdigest()
    python = env / "bin" / "python"
    stamp_file = env / "harness-stamp"
    if python.exists() and stamp_file.exists() and stamp_file.read_text().strip() == stamp:
        return python
    progress(f"harness bench: building the ref's environment in {env} (once per change of its packages)")
    venv.EnvBuilder(clear=True, with_pip=True).create(env)
    requirements = env / "requirements.txt"
    requirements.write_text("\n".join(pinned) + "\n")
    command = [str(python), "-m", "pip", "install", "--quiet", "--disable-pip-version-check", "-r", str(requirements)]
    for path in packages:
        command += ["-e", str(tree / path)]
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RefError(f"installing the ref's packages into {env} failed:\n{done.stderr.strip()[-4000:]}")
    stamp_file.write_text(stamp + "\n")
    return python


def _running_packages(top: Path) -> tuple[list[str], list[str]]:
    """(paths relative to ``top`` of the packages installed editable from it, ``name==version`` of every other
    installed distribution) in the running environment."""
    from importlib import metadata  # noqa: PLC0415 - only A/B mode needs it

    editable, pinned = [], []
    for dist in metadata.distributions():
        name = dist.metadata["Name"]
        url = _editable_url(dist)
        if url is not None:
            path = Path(url2pathname(urlparse(url).path))
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
