"""The CI configuration is consistent and defined once: every file a Dockerfile, workflow or CI script names exists,
every session they call exists in noxfile.py, the scripts hold no steps of their own, the workflows are valid GitHub
Actions YAML, and tox.ini is what noxfile.py generates (commands, environment and pins)."""

from __future__ import annotations

import re
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


sys.path.insert(0, str(ROOT / "ci"))
import tox_ini  # noqa: E402  (ci/ is no package)


def nox_sessions() -> set[str]:
    import nox.registry

    tox_ini.noxfile()
    return set(nox.registry.get())


def job_names() -> set[str]:
    """What ``ci/job.sh NAME`` accepts: a nox session, or ``prepare``."""
    return nox_sessions() | {"prepare"}


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
    sessions = nox_sessions()
    for src in SCRIPTS:
        for group in re.findall(r"nox\b[^\n]*?-s((?:\s+[a-z][a-z-]*)+)", src.read_text()):
            for name in group.split():
                assert name in sessions, f"{src.relative_to(ROOT)} runs nox session {name!r}, which noxfile.py lacks"


def test_the_repository_ci_runs_the_readme_test_command_first():
    run = (ROOT / ".ci" / "run").read_text()
    assert re.search(r"^python3 -m nox -s tests-cpu ", run, flags=re.M), ".ci/run must start with nox -s tests-cpu"


@pytest.mark.parametrize("src", SCRIPTS, ids=lambda p: str(p.relative_to(ROOT)))
def test_scripts_only_name_sessions(src: Path):
    """Steps, their arguments and their environment live in noxfile.py: the scripts run nothing else of their own."""
    code = "\n".join(line for line in src.read_text().splitlines() if not line.lstrip().startswith("#"))
    for word in ("pytest", "python -m harness", "CC=", "MOCKGPU", "--backends", "HARNESS_"):
        assert word not in code, f"{src.relative_to(ROOT)} holds a step of its own ({word!r}): put it in noxfile.py"


def test_workflow_steps_only_call_jobs():
    for wf, run in workflow_runs():
        assert "pytest" not in run and "nox -s" not in run, f"{wf}: a step runs {run!r}; call ci/job.sh SESSION"


def test_tox_ini_is_generated_from_the_noxfile():
    assert (ROOT / "tox.ini").read_text() == tox_ini.render(), "regenerate it: python ci/tox_ini.py --write"


def test_the_generated_tox_env_records_installs_commands_and_environment():
    rec = tox_ini.Recorder(["{posargs}"])
    rec.install("-e", "a", "pytest>=7")
    rec.run("pytest", "-k", "x or y", "{posargs}", env={"CC": "gcc"})
    rec.notify("bench", ["--against", "{env:BASE_REF:origin/main}"])
    assert rec.deps == ["-e a", "pytest>=7"]
    assert rec.commands == ["env CC=gcc pytest -k 'x or y' {posargs}", "tox -e bench -- --against {env:BASE_REF:origin/main}"]


def test_the_ci_doc_commands_name_real_sessions_and_the_check_passes():
    blocks = re.findall(r"```sh\n(.*?)```", (ROOT / "docs" / "ci.md").read_text(), flags=re.S)
    lines = [line for block in blocks for line in block.splitlines() if line.strip()]
    assert lines
    for line in lines:
        if line.startswith("python ci/tox_ini.py"):
            assert tox_ini.main(shlex.split(line)[2:]) == 0
        else:
            assert line.startswith("ci/job.sh ") and line.split()[1] in nox_sessions(), line
