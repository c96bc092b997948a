"""`nox -s images`: build both CI images (docker/io_uring, docker/cuda) with docker or podman and run their jobs here.

1. Engine: docker when its daemon answers, else podman (installed with apt-get when neither is present; run with
   ci/containers.conf). See ci/container_engine.py.
2. Bases: each Dockerfile's ``ARG BASE_IMAGE`` default is pulled; when it cannot be, the image is built on a stand-in
   base made from Debian packages (debootstrap, cached in the engine's store), and the command says so.
3. Jobs, each one container run without network (everything was installed at build time), as the image's user:
   - ``disk-io_uring``: tests-disk with REQUIRE_IO_URING=1 and docker/io_uring/seccomp.json: passes, header shows io_uring;
   - ``disk-fallback``: tests-disk under the engine's default seccomp profile: io_uring refused, the suite passes on
     the preadv fallback (REQUIRE_IO_URING=0);
   - ``disk-fallback-log``: ci/disk_fallback_probe.py under the default profile with DISK_IO_URING=1 (io_uring asked
     for every uncached read, buffered ones too): the ring is refused, the copies take preadv, the reason logged once;
   - ``mockgpu``: tests-mockgpu in the CUDA image;
   - ``cuda``: tests-cuda in the CUDA image: without a GPU it must fail naming the missing NVIDIA driver; on a host
     whose ``nvidia-smi`` works, the GPUs are passed in and it must pass.
4. Report: build seconds and image sizes, each job's result and the lines that show it (reports/images/summary.md,
   each run's full output beside it). Exit status 1 when a build or a job's expectation failed, 2 when no engine.

`python ci/images.py --help` lists the options (a subset of jobs, the engine, the stand-in's Debian suite).
"""

from __future__ import annotations

import argparse
import os
import platform
import re
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from container_engine import Engine, EngineError, find_engine, qualified, standin_base

ROOT = Path(__file__).resolve().parents[1]
SECCOMP_PROFILE = "docker/io_uring/seccomp.json"
BASE_ARG = re.compile(r"^ARG\s+BASE_IMAGE=(\S+)\s*$", re.M)
READ_PATH = re.compile(r"^DISK read path: .*$", re.M)
PYTEST_SUMMARY = re.compile(r"^=+ .*\b(passed|failed|error|errors)\b.* in [0-9.]+s.*=+$", re.M)
DRIVER_MISSING = re.compile(r"^.*NVIDIA driver.*$", re.M)
FALLBACK_LOG = re.compile(r"^log: WARNING DISK: io_uring .*reads use preadv$", re.M)
PROBE_COPY = re.compile(r"^copy \d+: read path (\S+);.*$", re.M)
RUN_TIMEOUT_S = 3600


@dataclass(frozen=True)
class Image:
    """A CI image: its Dockerfile (relative to the repository root) and the tag it is built as."""

    dockerfile: str
    tag: str

    def default_base(self) -> str:
        """The Dockerfile's ``ARG BASE_IMAGE=`` default. Raises ``ValueError`` when it declares none."""
        found = BASE_ARG.search((ROOT / self.dockerfile).read_text())
        if found is None:
            raise ValueError(f"{self.dockerfile} declares no `ARG BASE_IMAGE=<image>` default")
        return found.group(1)


IMAGES = {"io_uring": Image("docker/io_uring/Dockerfile", "runtime-ci-io-uring"),
          "cuda": Image("docker/cuda/Dockerfile", "runtime-ci-cuda")}


@dataclass(frozen=True)
class Job:
    """One container run of ``image``: ``options`` for `run`, ``command`` for the image's entry point, and ``check``,
    which reads the exit status and output and returns what is wrong (empty: the job met its expectation) and the
    lines that show what happened."""

    name: str
    image: str
    options: tuple[str, ...]
    command: tuple[str, ...]
    check: Callable[[int, str], tuple[list[str], list[str]]]


def lines(pattern: re.Pattern[str], out: str) -> list[str]:
    return [m.group(0).strip() for m in pattern.finditer(out)]


def _check_read_path(header: str, says: str) -> Callable[[int, str], tuple[list[str], list[str]]]:
    """The check of a tests-disk job: exit 0 and a pytest header line that starts with ``header`` (``says``: how the
    message names it)."""
    def check(rc: int, out: str) -> tuple[list[str], list[str]]:
        shown = lines(READ_PATH, out) + lines(PYTEST_SUMMARY, out)[-1:]
        problems = [] if rc == 0 else [f"tests-disk exited {rc}"]
        if not any(line.startswith(header) for line in shown):
            problems.append(f"the pytest header does not say `{says}`")
        return problems, shown
    return check


# io_uring required (the job's seccomp profile allows it); the engine's default profile: preadv and the reason
check_io_uring = _check_read_path("DISK read path: io_uring", "DISK read path: io_uring")
check_fallback = _check_read_path("DISK read path: preadv fallback: ", "DISK read path: preadv fallback: <reason>")


def check_fallback_log(rc: int, out: str) -> tuple[list[str], list[str]]:
    """The probe under the default profile: two or more copies read with preadv and none with io_uring (the others
    found the file in the page cache), the reason logged exactly once."""
    paths, logged = PROBE_COPY.findall(out), lines(FALLBACK_LOG, out)
    problems = [] if rc == 0 else [f"the probe exited {rc}"]
    if paths.count("preadv") < 2 or not set(paths) <= {"preadv", "page_cache"}:
        problems.append(f"expected two or more copies on preadv and none on io_uring, got read paths {paths}")
    if len(logged) != 1:
        problems.append(f"expected the fallback's reason logged once, found it {len(logged)} times")
    return problems, logged + lines(PROBE_COPY, out)


def check_passed(rc: int, out: str) -> tuple[list[str], list[str]]:
    """A job that must pass: exit 0."""
    return ([] if rc == 0 else [f"exited {rc}"]), lines(PYTEST_SUMMARY, out)


def check_driver_missing(rc: int, out: str) -> tuple[list[str], list[str]]:
    """tests-cuda without a GPU: a non-zero exit and a message that names the missing NVIDIA driver."""
    named = lines(DRIVER_MISSING, out)
    problems = [] if rc != 0 else ["tests-cuda passed without a GPU"]
    if not named:
        problems.append("no message names the missing NVIDIA driver")
    return problems, named[:1]


def jobs(engine: Engine, gpu: bool) -> list[Job]:
    """The jobs to run; ``gpu``: the host's GPUs are passed to the CUDA image and tests-cuda must pass."""
    seccomp = ("--security-opt", f"seccomp={ROOT / SECCOMP_PROFILE}")
    # kernels before 5.12 charge io_uring rings to RLIMIT_MEMLOCK, later ones to the memory cgroup
    memlock = ("--ulimit", "memlock=-1:-1") if _kernel_version() < (5, 12) else ()
    probe = ("--entrypoint", ".nox/tests-disk/bin/python")
    cuda_gpu = tuple(engine.gpu_flags()) if gpu else ()
    return [
        Job("disk-io_uring", "io_uring", (*seccomp, *memlock), ("tests-disk",), check_io_uring),
        Job("disk-fallback", "io_uring", (*memlock, "-e", "REQUIRE_IO_URING=0"), ("tests-disk",), check_fallback),
        Job("disk-fallback-log", "io_uring", (*memlock, *probe, "-e", "DISK_IO_URING=1"), ("ci/disk_fallback_probe.py",),
            check_fallback_log),
        Job("mockgpu", "cuda", (), ("tests-mockgpu",), check_passed),
        Job("cuda", "cuda", cuda_gpu, ("tests-cuda",), check_passed if gpu else check_driver_missing),
    ]


def _kernel_version() -> tuple[int, int]:
    found = re.match(r"(\d+)\.(\d+)", platform.release())
    return (int(found.group(1)), int(found.group(2))) if found else (0, 0)


def host_has_gpu() -> bool:
    """Whether ``nvidia-smi -L`` lists a GPU here (then the CUDA image gets the GPUs)."""
    if shutil.which("nvidia-smi") is None:
        return False
    done = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True)
    return done.returncode == 0 and "GPU" in done.stdout


def resolve_base(engine: Engine, image: Image, standin: str, suite: str) -> tuple[str, str]:
    """The base to build ``image`` on and how it was chosen: the real one when it is here or can be pulled (and
    ``standin`` is not ``always``), else the Debian stand-in (unless ``standin`` is ``never``: ``EngineError``)."""
    real = qualified(image.default_base())
    if standin != "always":
        if engine.has_image(real):
            return real, "real base, already here"
        why = engine.pull(real)
        if not why:
            return real, "real base, pulled"
        if standin == "never":
            raise EngineError(f"the base {real} of {image.dockerfile} cannot be pulled: {why}")
        print(f"images: the real base {real} cannot be pulled ({why}); building {image.dockerfile} on a stand-in "
              f"base made from Debian {suite} packages instead", flush=True)
    return standin_base(engine, suite), f"stand-in for {real}"


def stream(argv: list[str], env: dict[str, str], log: Path, timeout: float,
           on_timeout: Callable[[], object] = lambda: None) -> tuple[int, str]:
    """Runs ``argv``, echoing its output and writing it to ``log``; returns (exit status, output). After ``timeout``
    seconds ``on_timeout`` is called (it stops the container) and the process is killed."""
    log.parent.mkdir(parents=True, exist_ok=True)
    with subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, errors="replace",
                          env={**os.environ, **env}) as proc, log.open("w", buffering=1) as sink:
        def stop() -> None:
            print(f"images: `{' '.join(argv[:3])} ...` ran past {timeout:.0f} s: stopping it", flush=True)
            on_timeout()
            proc.kill()
        timer = threading.Timer(timeout, stop)
        timer.start()
        captured = []
        try:
            for line in proc.stdout or ():
                sys.stdout.write(line)
                sink.write(line)
                captured.append(line)
        finally:
            timer.cancel()
        return proc.wait(), "".join(captured)


@dataclass
class Built:
    """An image built: its base (and how it was chosen), build seconds, size in bytes, or the reason it failed."""

    base: str
    how: str
    seconds: float = 0.0
    size: int = 0
    error: str = ""


def build(engine: Engine, name: str, image: Image, base: str, how: str, logs: Path) -> Built:
    """Builds ``image`` on ``base`` from the repository root; the build's output goes to the terminal and a log."""
    print(f"== images: building {image.tag} ({image.dockerfile}) on {base} ==", flush=True)
    start = time.monotonic()
    argv = engine.argv("build", "-f", str(ROOT / image.dockerfile), "-t", image.tag, "--build-arg",
                       f"BASE_IMAGE={base}", str(ROOT))
    rc, _ = stream(argv, engine.env, logs / f"build-{name}.log", RUN_TIMEOUT_S)
    built = Built(base, how, time.monotonic() - start)
    if rc != 0:
        built.error = f"build exited {rc} (log: {logs / f'build-{name}.log'})"
    else:
        built.size = engine.image_bytes(image.tag)
    return built


@dataclass
class Ran:
    """A job's outcome: what is wrong (empty: as expected), the lines that show it, its seconds."""

    problems: list[str]
    shown: list[str]
    seconds: float


def run_job(engine: Engine, job: Job, logs: Path) -> Ran:
    """Runs ``job`` in a fresh container without network and checks it."""
    print(f"== images: job {job.name}: {IMAGES[job.image].tag} {' '.join(job.command)} ==", flush=True)
    name = f"runtime-ci-{job.name}-{os.getpid()}"
    argv = engine.argv("run", "--rm", "--name", name, "--network", "none", *job.options, IMAGES[job.image].tag,
                       *job.command)
    start = time.monotonic()
    rc, out = stream(argv, engine.env, logs / f"{job.name}.log", RUN_TIMEOUT_S,
                     on_timeout=lambda: engine.run("kill", name, check=False))
    problems, shown = job.check(rc, out)
    return Ran(problems, shown, time.monotonic() - start)


def summary(engine: Engine, built: dict[str, Built], ran: dict[str, Ran]) -> str:
    """The report: one table of images (base, build seconds, size), one of jobs (result, seconds, evidence)."""
    out = [f"# CI images ({engine.name})", "", "| image | base | build | size |", "|---|---|---|---|"]
    for name, b in built.items():
        size = f"{b.size / 2**20:,.0f} MiB" if b.size else b.error
        out.append(f"| {IMAGES[name].tag} | {b.base} ({b.how}) | {b.seconds:.0f} s | {size} |")
    out += ["", "| job | result | time | lines that show it |", "|---|---|---|---|"]
    for name, r in ran.items():
        result = "ok" if not r.problems else "FAILED: " + "; ".join(r.problems)
        out.append(f"| {name} | {result} | {r.seconds:.0f} s | {'<br>'.join(r.shown)} |")
    return "\n".join(out) + "\n"


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="ci/images.py", description=__doc__.split("\n\n")[0])
    parser.add_argument("--engine", choices=["auto", "docker", "podman"], default="auto")
    parser.add_argument("--jobs", default="all",
                        help="comma-separated jobs to run (disk-io_uring, disk-fallback, disk-fallback-log, mockgpu, "
                             "cuda); only their images are built. Default: all")
    parser.add_argument("--standin", choices=["auto", "always", "never"], default="auto",
                        help="build on the Debian stand-in base: when the real one cannot be pulled (auto), always, "
                             "or never (fail instead)")
    parser.add_argument("--standin-suite", default="bookworm", help="Debian suite of the stand-in base")
    parser.add_argument("--out", type=Path, default=ROOT / "reports" / "images",
                        help="where the summary and every run's log go")
    return parser.parse_args(argv)


def main(argv: list[str]) -> int:
    args, start = parse_args(argv), time.monotonic()
    known = [j.name for j in jobs(Engine("docker"), gpu=False)]
    wanted = known if args.jobs == "all" else args.jobs.split(",")
    if unknown := sorted(set(wanted) - set(known)):
        print(f"images: unknown jobs {unknown}; jobs: {known}", file=sys.stderr)
        return 2
    try:
        engine = find_engine(args.engine)
    except EngineError as e:
        print(f"images: {e}", file=sys.stderr)
        return 2
    gpu = host_has_gpu()
    todo = [j for j in jobs(engine, gpu) if j.name in wanted]
    print(f"images: engine {engine.name}; GPU here: {'yes' if gpu else 'no'}", flush=True)
    built: dict[str, Built] = {}
    ran: dict[str, Ran] = {}
    for name in dict.fromkeys(j.image for j in todo):  # each image built, then its jobs run
        try:
            base, how = resolve_base(engine, IMAGES[name], args.standin, args.standin_suite)
            built[name] = build(engine, name, IMAGES[name], base, how, args.out)
        except EngineError as e:
            print(f"images: {e}", file=sys.stderr)
            built[name] = Built("-", "no base", error=str(e))
        for job in (j for j in todo if j.image == name):
            ran[job.name] = Ran([f"image {IMAGES[name].tag} not built"], [], 0.0) if built[name].error \
                else run_job(engine, job, args.out)
    report = summary(engine, built, ran)
    (args.out / "summary.md").write_text(report)
    bad = sum(bool(r.problems) for r in ran.values())
    # the closing line in pytest's format, which .ci/run's summary table quotes
    print(f"\n{report}\n== images: {len(ran) - bad} jobs passed, {bad} failed in {time.monotonic() - start:.0f}s ==",
          flush=True)
    return 1 if bad or any(b.error for b in built.values()) else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
