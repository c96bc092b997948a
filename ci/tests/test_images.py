"""`ci/images.py` (`nox -s images`) and `ci/container_engine.py`: the Dockerfiles' base arguments and users, the
engine choice, image references, and the checks that decide each image job from its exit status and output. The
builds and runs themselves are `nox -s images`'s (they need a container engine and minutes)."""

from __future__ import annotations

import re
import stat
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "ci"))

import container_engine  # noqa: E402
import images  # noqa: E402

REAL_BASES = {"docker/io_uring/Dockerfile": "python:3.12-slim",
              "docker/cuda/Dockerfile": "nvidia/cuda:12.8.1-devel-ubuntu24.04"}


def test_every_dockerfile_is_an_image_of_the_command():
    assert sorted(i.dockerfile for i in images.IMAGES.values()) == \
        sorted(str(p.relative_to(ROOT)) for p in (ROOT / "docker").glob("*/Dockerfile"))


@pytest.mark.parametrize("dockerfile", sorted(REAL_BASES))
def test_dockerfile_takes_its_real_base_as_build_argument(dockerfile: str):
    text = (ROOT / dockerfile).read_text()
    image = next(i for i in images.IMAGES.values() if i.dockerfile == dockerfile)
    assert image.default_base() == REAL_BASES[dockerfile]
    assert re.findall(r"^FROM\s+(\S+)", text, flags=re.M) == ["${BASE_IMAGE}"]
    assert text.index("ARG BASE_IMAGE=") < text.index("FROM ")


@pytest.mark.parametrize("dockerfile", sorted(REAL_BASES))
def test_tests_run_as_a_non_root_user(dockerfile: str):
    text = (ROOT / dockerfile).read_text()
    users = re.findall(r"^USER\s+(\S+)", text, flags=re.M)
    assert users and users[-1] not in ("root", "0", "0:0")
    assert text.rindex("USER ") < text.index("ci/job.sh prepare") < text.index("ENTRYPOINT")


def test_a_dockerfile_without_base_argument_is_named(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    (tmp_path / "Dockerfile").write_text("FROM debian:bookworm\n")
    monkeypatch.setattr(images, "ROOT", tmp_path)
    with pytest.raises(ValueError, match="Dockerfile declares no `ARG BASE_IMAGE"):
        images.Image("Dockerfile", "x").default_base()


@pytest.mark.parametrize(("ref", "full"), [
    ("python:3.12-slim", "docker.io/library/python:3.12-slim"),
    ("nvidia/cuda:12.8.1-devel-ubuntu24.04", "docker.io/nvidia/cuda:12.8.1-devel-ubuntu24.04"),
    ("docker.io/library/debian:bookworm", "docker.io/library/debian:bookworm"),
    ("ghcr.io/owner/image:1", "ghcr.io/owner/image:1"),
    ("localhost/runtime-ci-standin:bookworm-0123", "localhost/runtime-ci-standin:bookworm-0123"),
    ("registry:5000/image", "registry:5000/image"),
])
def test_references_are_qualified_as_docker_normalizes_them(ref: str, full: str):
    assert container_engine.qualified(ref) == full


def _fake_tool(bin_dir: Path, name: str, exit_status: int) -> None:
    tool = bin_dir / name
    tool.write_text(f"#!/bin/sh\nexit {exit_status}\n")
    tool.chmod(tool.stat().st_mode | stat.S_IXUSR)


@pytest.mark.parametrize(("docker_info_exit", "expected"), [(0, "docker"), (1, "podman")])
def test_docker_is_used_when_its_daemon_answers_else_podman(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                            docker_info_exit: int, expected: str):
    _fake_tool(tmp_path, "docker", docker_info_exit)
    _fake_tool(tmp_path, "podman", 0)
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.delenv("CONTAINERS_CONF", raising=False)
    engine = container_engine.find_engine("auto")
    assert engine.name == expected
    if expected == "podman":
        assert engine.env == {"CONTAINERS_CONF": str(ROOT / "ci" / "containers.conf")}


def test_a_chosen_docker_without_daemon_is_an_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    _fake_tool(tmp_path, "docker", 1)
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(container_engine.EngineError, match="daemon does not answer"):
        container_engine.find_engine("docker")


def test_podman_keeps_a_containers_conf_the_caller_set(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    _fake_tool(tmp_path, "podman", 0)
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setenv("CONTAINERS_CONF", "/etc/mine.conf")
    assert container_engine.find_engine("podman").env == {}


def test_podman_settings_are_the_sandbox_ones():
    tomllib = pytest.importorskip("tomllib")
    conf = tomllib.loads((ROOT / "ci" / "containers.conf").read_text())
    assert conf == {"containers": {"default_ulimits": []}, "engine": {"cgroup_manager": "cgroupfs", "runtime": "runc"}}


def test_the_standin_tag_follows_its_recipe():
    a, b = container_engine.standin_tag("bookworm", "http://m/debian"), container_engine.standin_tag("trixie", "http://m/debian")
    assert a.startswith("localhost/runtime-ci-standin:bookworm-") and b.startswith("localhost/runtime-ci-standin:trixie-")
    assert a == container_engine.standin_tag("bookworm", "http://m/debian") and a.split("-")[-1] != b.split("-")[-1]


IO_URING_RUN = """\
platform linux -- Python 3.11.2, pytest-8.3.4
DISK read path: io_uring (REQUIRE_IO_URING=1: the suite fails without it)
======================== 212 passed, 3 skipped in 41.20s ========================
"""
FALLBACK_RUN = """\
DISK read path: preadv fallback: ENOSYS: this kernel has no io_uring (Linux 5.1+ needed) or a seccomp filter hides it
======================== 210 passed, 5 skipped in 39.02s ========================
"""
PROBE_RUN = """\
log: WARNING DISK: io_uring unavailable ([Errno 38] io_uring_setup failed: ENOSYS: ...); reads use preadv
copy 1: read path preadv; io_uring error: [Errno 38] io_uring_setup failed: ENOSYS: ...
copy 2: read path preadv; io_uring error: [Errno 38] io_uring_setup failed: ENOSYS: ...
"""
NO_DRIVER_RUN = """\
ERROR: --strict-backends: requested backend(s) unavailable:
  CUDA: the NVIDIA driver library cannot be loaded (DynamicLibNotFoundError: ...); install the NVIDIA driver on a machine
nox > Session tests-cuda failed.
"""


def test_io_uring_job_needs_the_header_and_a_pass():
    assert images.check_io_uring(0, IO_URING_RUN) == ([], [IO_URING_RUN.splitlines()[1], IO_URING_RUN.splitlines()[2]])
    problems, _ = images.check_io_uring(0, FALLBACK_RUN)
    assert problems == ["the pytest header does not say `DISK read path: io_uring`"]
    assert images.check_io_uring(1, IO_URING_RUN)[0] == ["tests-disk exited 1"]


def test_fallback_job_needs_the_fallback_header_and_a_pass():
    assert images.check_fallback(0, FALLBACK_RUN)[0] == []
    assert images.check_fallback(0, IO_URING_RUN)[0] == \
        ["the pytest header does not say `DISK read path: preadv fallback: <reason>`"]


def test_fallback_reason_must_be_logged_exactly_once():
    problems, shown = images.check_fallback_log(0, PROBE_RUN)
    assert problems == [] and shown[0].startswith("log: WARNING DISK: io_uring unavailable")
    twice = PROBE_RUN.replace("copy 1", PROBE_RUN.splitlines()[0] + "\ncopy 1")
    assert images.check_fallback_log(0, twice)[0] == ["expected the fallback's reason logged once, found it 2 times"]
    on_uring = "copy 1: read path io_uring; io_uring error: None\ncopy 2: read path io_uring; io_uring error: None\n"
    assert images.check_fallback_log(0, on_uring)[0] == [
        "expected two or more copies on preadv and none on io_uring, got read paths ['io_uring', 'io_uring']",
        "expected the fallback's reason logged once, found it 0 times"]


def test_cuda_without_gpu_must_fail_naming_the_driver():
    problems, shown = images.check_driver_missing(1, NO_DRIVER_RUN)
    assert problems == [] and "the NVIDIA driver library cannot be loaded" in shown[0]
    assert images.check_driver_missing(0, NO_DRIVER_RUN)[0] == ["tests-cuda passed without a GPU"]
    assert images.check_driver_missing(1, "Segmentation fault\n")[0] == \
        ["no message names the missing NVIDIA driver"]


def test_every_job_runs_without_network_in_its_image(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    calls: list[list[str]] = []
    monkeypatch.setattr(images, "stream", lambda argv, *a, **k: (calls.append(argv), (0, ""))[1])
    engine = container_engine.Engine("podman")
    for job in images.jobs(engine, gpu=False):
        images.run_job(engine, job, tmp_path)
    assert len(calls) == 5 and all(c[:2] == ["podman", "run"] and "--network" in c for c in calls)
    assert all(c[c.index("--network") + 1] == "none" for c in calls)
    seccomp = [c for c in calls if any(a.startswith("seccomp=") for a in c)]
    assert [c[-1] for c in seccomp] == ["tests-disk"]


def test_stream_echoes_logs_and_returns_the_output(tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    rc, out = images.stream(["sh", "-c", "echo one; echo two >&2; exit 3"], {}, tmp_path / "a.log", 600)
    assert (rc, sorted(out.splitlines())) == (3, ["one", "two"])
    assert sorted((tmp_path / "a.log").read_text().splitlines()) == ["one", "two"]
    assert "one" in capsys.readouterr().out


def test_stream_stops_a_run_past_its_time(tmp_path: Path):
    stopped = []
    rc, _ = images.stream(["sleep", "600"], {}, tmp_path / "b.log", 0.2, on_timeout=lambda: stopped.append(True))
    assert stopped == [True] and rc != 0


def test_unknown_jobs_are_refused(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]):
    monkeypatch.setattr(images, "find_engine", lambda choice: container_engine.Engine("podman"))
    assert images.main(["--jobs", "disk-io_uring,nope"]) == 2
    assert "unknown jobs ['nope']" in capsys.readouterr().err



class _Registryless(container_engine.Engine):
    """An engine with no image here and a registry that cannot be reached."""

    def has_image(self, ref: str) -> bool:
        return False

    def pull(self, ref: str) -> str:
        return "dial tcp: lookup registry-1.docker.io: no such host"


def test_an_unpullable_base_is_replaced_by_the_standin_and_said(monkeypatch: pytest.MonkeyPatch,
                                                                  capsys: pytest.CaptureFixture[str]):
    monkeypatch.setattr(images, "standin_base", lambda engine, suite: f"localhost/runtime-ci-standin:{suite}-0")
    base, how = images.resolve_base(_Registryless("podman"), images.IMAGES["io_uring"], "auto", "bookworm")
    assert (base, how) == ("localhost/runtime-ci-standin:bookworm-0", "stand-in for docker.io/library/python:3.12-slim")
    assert "docker.io/library/python:3.12-slim cannot be pulled (dial tcp" in capsys.readouterr().out
    with pytest.raises(container_engine.EngineError, match="cannot be pulled: dial tcp"):
        images.resolve_base(_Registryless("podman"), images.IMAGES["io_uring"], "never", "bookworm")


def test_copies_the_page_cache_served_count_neither_way():
    served = "copy 1: read path page_cache; io_uring error: None\n" + PROBE_RUN.replace("copy 1", "copy 3")
    assert images.check_fallback_log(0, served)[0] == []
    assert images.check_fallback_log(0, served.replace("copy 2: read path preadv", "copy 2: read path page_cache"))[0] \
        == ["expected two or more copies on preadv and none on io_uring, got read paths ['page_cache', 'preadv', "
            "'page_cache']"]
