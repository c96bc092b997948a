"""The CI configuration is consistent: every file a Dockerfile, workflow or CI script names exists, every job and nox
session they call exists, the workflows are valid GitHub Actions YAML, and tox.ini mirrors noxfile.py."""

from __future__ import annotations

import configparser
import functools
import re
import runpy
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
WORKFLOWS = sorted((ROOT / ".github" / "workflows").glob("*.yml"))
DOCKERFILES = sorted((ROOT / "docker").glob("*/Dockerfile"))
SCRIPTS = sorted((ROOT / "ci").glob("*.sh")) + [ROOT / ".ci" / "run"]
PATH_TOKEN = re.compile(r"(?<![\w./-])((?:ci|docker|docs|\.github|\.ci)/[\w./-]*[\w])")


@functools.cache
def nox_sessions() -> dict[str, object]:
    import nox.registry

    runpy.run_path(str(ROOT / "noxfile.py"))
    return dict(nox.registry.get())


def job_names() -> set[str]:
    return set(re.findall(r"^    ([a-z][a-z-]*)\)", (ROOT / "ci" / "job.sh").read_text(), flags=re.M))


def workflow_runs() -> list[tuple[str, str]]:
    """(workflow file, run script) of every step."""
    out = []
    for wf in WORKFLOWS:
        for job in yaml.safe_load(wf.read_text())["jobs"].values():
            out += [(wf.name, step["run"]) for step in job.get("steps", []) if "run" in step]
    return out


def test_there_is_something_to_check():
    assert WORKFLOWS and DOCKERFILES and (ROOT / "ci" / "job.sh").exists()


@pytest.mark.parametrize("wf", WORKFLOWS, ids=lambda p: p.name)
def test_workflow_is_valid_github_actions_yaml(wf: Path):
    doc = yaml.safe_load(wf.read_text())
    assert isinstance(doc, dict) and doc.get("jobs"), f"{wf.name}: no jobs"
    result = subprocess.run([sys.executable, "-m", "check_jsonschema", "--builtin-schema", "vendor.github-workflows",
                             str(wf)], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr


def _referenced_paths(text: str) -> set[str]:
    return {m.rstrip(".") for m in PATH_TOKEN.findall(text) if "*" not in m and "$" not in m}


@pytest.mark.parametrize("src", WORKFLOWS + DOCKERFILES + SCRIPTS, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_referenced_file_exists(src: Path):
    missing = sorted(p for p in _referenced_paths(src.read_text()) if not (ROOT / p).exists())
    assert not missing, f"{src.relative_to(ROOT)} names files that do not exist: {missing}"


@pytest.mark.parametrize("df", DOCKERFILES, ids=lambda p: str(p.relative_to(ROOT)))
def test_dockerfile_copy_sources_exist(df: Path):
    for line in df.read_text().splitlines():
        words = shlex.split(line) if re.match(r"^(COPY|ADD)\s", line) else []
        sources = [w for w in words[1:-1] if not w.startswith("--")]
        for s in sources:
            assert (ROOT / s).exists(), f"{df.relative_to(ROOT)}: COPY source {s!r} does not exist in the build context"


def test_every_called_job_exists():
    jobs = job_names()
    texts = [(wf, run) for wf, run in workflow_runs()]
    texts += [(str(p.relative_to(ROOT)), p.read_text()) for p in SCRIPTS + DOCKERFILES]
    for where, text in texts:
        for job in re.findall(r"ci/job\.sh\s+([a-z][a-z-]*)", text):
            assert job in jobs, f"{where} calls ci/job.sh {job}, which is no job of ci/job.sh ({sorted(jobs)})"
        for cmd in re.findall(r'CMD \["([a-z-]+)"\]', text):
            assert cmd in jobs, f"{where}: CMD {cmd} is no job of ci/job.sh"


def test_every_called_nox_session_exists():
    sessions = set(nox_sessions())
    for src in SCRIPTS:
        for name in re.findall(r"-s\s+([a-z][a-z-]*)", src.read_text()):
            assert name in sessions, f"{src.relative_to(ROOT)} runs nox session {name!r}, which noxfile.py lacks"


def _tox_envs() -> dict[str, configparser.SectionProxy]:
    cfg = configparser.ConfigParser(interpolation=None)
    cfg.read(ROOT / "tox.ini")
    return {s.removeprefix("testenv:"): cfg[s] for s in cfg.sections() if s.startswith("testenv:")}


def test_tox_has_an_env_for_every_nox_session_and_no_other():
    assert set(_tox_envs()) == set(nox_sessions())


def test_tox_envs_run_the_same_pre_checks_as_nox():
    envs = _tox_envs()
    for name, fn in nox_sessions().items():
        needs_cc = "needs-cc" in (getattr(fn, "tags", None) or [])
        pre = envs[name].get("commands_pre", "")
        assert needs_cc == ("ci/require_tools.py cc" in pre), (
            f"nox session {name} {'checks' if needs_cc else 'does not check'} the C compiler, but tox env {name} "
            f"{'does not' if needs_cc else 'does'} (commands_pre = {pre!r})")


def test_tox_mockgpu_envs_set_mockgpu_like_nox():
    for name, env in _tox_envs().items():
        if name in ("tests-mockgpu",):
            assert "MOCKGPU" in env.get("setenv", ""), f"tox env {name} must set MOCKGPU=1 like its nox session"
