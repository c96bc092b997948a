"""The container engine `ci/images.py` drives (docker or podman, whichever works here), and the stand-in base image it
builds from Debian packages when a Dockerfile's real base cannot be pulled (no registry access).

Nothing here knows the project's images: they are `ci/images.py`'s. Stdlib only, so it runs before any install."""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["Engine", "EngineError", "find_engine", "qualified", "standin_base", "STANDIN_PACKAGES"]

PODMAN_CONF = Path(__file__).resolve().parent / "containers.conf"
STANDIN_PACKAGES = ("python3", "python3-pip", "python3-venv", "python-is-python3", "ca-certificates")
"""What every Dockerfile needs of its base besides apt-get (docker/README.md, "Stand-in bases")."""
LOCAL_CAS = Path("/usr/local/share/ca-certificates")
"""Debian's directory of locally added certificate authorities (update-ca-certificates(8))."""
CA_BUNDLE = "/etc/ssl/certs/ca-certificates.crt"


class EngineError(RuntimeError):
    """No container engine can be used or installed here, or the stand-in base cannot be built; the message says
    what to install or run."""


@dataclass(frozen=True)
class Engine:
    """A container engine's command line: ``name`` is ``docker`` or ``podman``; ``env`` is the environment its
    commands run with (podman: ``CONTAINERS_CONF``)."""

    name: str
    env: dict[str, str] = field(default_factory=dict)

    def argv(self, *args: str) -> list[str]:
        return [self.name, *args]

    def run(self, *args: str, check: bool = True, timeout: float | None = None) -> subprocess.CompletedProcess[str]:
        """The engine command ``args``, its output captured. Raises ``EngineError`` when it fails and ``check``."""
        done = subprocess.run(self.argv(*args), capture_output=True, text=True, env={**os.environ, **self.env},
                              timeout=timeout)
        if check and done.returncode != 0:
            raise EngineError(f"`{' '.join(self.argv(*args))}` failed (exit {done.returncode}): {done.stderr.strip()}")
        return done

    def has_image(self, ref: str) -> bool:
        return self.run("image", "inspect", ref, check=False).returncode == 0

    def image_bytes(self, ref: str) -> int:
        """The image's size in bytes, as the engine counts it (``image inspect``'s ``Size``: every layer)."""
        return int(self.run("image", "inspect", "--format", "{{.Size}}", ref).stdout.split()[0])

    def pull(self, ref: str) -> str:
        """Pulls ``ref``; returns ``""`` on success, else the engine's reason (last line of its error output)."""
        try:
            done = self.run("pull", ref, check=False, timeout=600)
        except subprocess.TimeoutExpired:
            return "the pull took more than 10 minutes"
        return "" if done.returncode == 0 else (done.stderr.strip().splitlines() or [f"exit {done.returncode}"])[-1]

    def gpu_flags(self) -> list[str]:
        """`run` options that hand the host's NVIDIA GPUs to a container (NVIDIA Container Toolkit; podman: CDI)."""
        return ["--gpus", "all"] if self.name == "docker" else ["--device", "nvidia.com/gpu=all"]


def qualified(ref: str) -> str:
    """``ref`` with the registry Docker assumes made explicit (``python:3.12-slim`` ->
    ``docker.io/library/python:3.12-slim``): podman resolves no short names without a registries.conf search list."""
    first, _, rest = ref.partition("/")
    if rest and ("." in first or ":" in first or first == "localhost"):
        return ref
    return f"docker.io/{ref}" if rest else f"docker.io/library/{ref}"


def find_engine(choice: str = "auto") -> Engine:
    """``docker`` when its daemon answers, else ``podman`` (installed with apt-get when neither is present).
    ``choice`` (``auto``, ``docker``, ``podman``) restricts the search. Podman runs with `ci/containers.conf` unless
    ``CONTAINERS_CONF`` is set. Raises ``EngineError`` naming what to install."""
    if choice in ("auto", "docker") and shutil.which("docker"):
        try:
            docker_ok = subprocess.run(["docker", "info"], capture_output=True, timeout=30).returncode == 0
        except subprocess.TimeoutExpired:
            docker_ok = False
        if docker_ok:
            return Engine("docker")
        if choice == "docker":
            raise EngineError("docker is installed but its daemon does not answer (`docker info` fails)")
    if choice == "docker":
        raise EngineError("docker is not installed; install Docker Engine, or run with --engine podman")
    if shutil.which("podman") is None:
        print("images: no usable container engine here: installing podman and runc (apt-get)", flush=True)
        apt_install("podman", "runc")
    return Engine("podman", {} if "CONTAINERS_CONF" in os.environ else {"CONTAINERS_CONF": str(PODMAN_CONF)})


def apt_install(*packages: str) -> None:
    """Installs Debian ``packages`` with apt-get (as root). Raises ``EngineError`` with the command to run otherwise."""
    command = f"apt-get install -y {' '.join(packages)}"
    if shutil.which("apt-get") is None or os.geteuid() != 0:
        raise EngineError(f"{', '.join(packages)} missing and not installable here (needs apt-get as root): "
                          f"run `{command}` or install the equivalent")
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    for argv in (["apt-get", "update", "-qq"], ["apt-get", "install", "-y", "-qq", *packages]):
        done = subprocess.run(argv, capture_output=True, text=True, env=env)
        if done.returncode != 0:
            raise EngineError(f"`{' '.join(argv)}` failed (exit {done.returncode}): {done.stderr.strip()[-2000:]}")


def standin_tag(suite: str, mirror: str) -> str:
    """The stand-in's tag: its recipe's hash (suite, mirror, packages, the host's local CAs), so a cached stand-in is
    reused exactly while its recipe is unchanged."""
    recipe = hashlib.sha256(f"{suite}\n{mirror}\n{' '.join(STANDIN_PACKAGES)}\n".encode())
    for ca in sorted(LOCAL_CAS.glob("*.crt")) if LOCAL_CAS.is_dir() else []:
        recipe.update(ca.name.encode() + ca.read_bytes())
    return f"localhost/runtime-ci-standin:{suite}-{recipe.hexdigest()[:12]}"


def standin_base(engine: Engine, suite: str = "bookworm", mirror: str = "http://deb.debian.org/debian") -> str:
    """A Debian ``suite`` base image built with ``debootstrap --variant=minbase`` and ``import``ed into the engine,
    or the one built before from the same recipe (the engine's image store is the cache). The host's local CAs
    (:data:`LOCAL_CAS`) are trusted inside it, so builds work behind the same TLS-inspecting proxy as the host.
    Returns its tag. Raises ``EngineError`` when debootstrap cannot run (not root, no apt-get) or fails."""
    tag = standin_tag(suite, mirror)
    if engine.has_image(tag):
        print(f"images: stand-in base {tag} is cached; reusing it", flush=True)
        return tag
    if shutil.which("debootstrap") is None:
        apt_install("debootstrap")
    print(f"images: building the stand-in base {tag} (debootstrap {suite}, a few minutes)", flush=True)
    with tempfile.TemporaryDirectory(prefix="runtime-ci-standin-", dir="/var/tmp") as tmp:
        rootfs = Path(tmp) / "rootfs"
        _debootstrap(rootfs, suite, mirror)
        _trust_local_cas(rootfs)
        for junk in ("var/cache/apt/archives", "var/lib/apt/lists"):
            shutil.rmtree(rootfs / junk, ignore_errors=True)
        _import(engine, rootfs, tag)
    return tag


def _debootstrap(rootfs: Path, suite: str, mirror: str) -> None:
    argv = ["debootstrap", "--variant=minbase", f"--include={','.join(STANDIN_PACKAGES)}", suite, str(rootfs), mirror]
    done = subprocess.run(argv, capture_output=True, text=True)
    if done.returncode != 0:
        raise EngineError(f"`{' '.join(argv)}` failed (exit {done.returncode}): {done.stdout[-2000:]}"
                          f"{done.stderr[-2000:]}")


def _trust_local_cas(rootfs: Path) -> None:
    cas = sorted(LOCAL_CAS.glob("*.crt")) if LOCAL_CAS.is_dir() else []
    if not cas:
        return
    for ca in cas:
        shutil.copy2(ca, rootfs / LOCAL_CAS.relative_to("/") / ca.name)
    done = subprocess.run(["chroot", str(rootfs), "update-ca-certificates"], capture_output=True, text=True)
    if done.returncode != 0:
        raise EngineError(f"update-ca-certificates in the stand-in failed: {done.stderr.strip()}")


def _import(engine: Engine, rootfs: Path, tag: str) -> None:
    # pip reads certifi's bundle, not the system's, unless told: point it (and requests) at the system bundle
    changes = [f"ENV {var}={CA_BUNDLE}" for var in ("SSL_CERT_FILE", "PIP_CERT", "REQUESTS_CA_BUNDLE")]
    changes.append('CMD ["/bin/bash"]')
    tar = subprocess.Popen(["tar", "-C", str(rootfs), "--numeric-owner", "-c", "."], stdout=subprocess.PIPE)
    argv = engine.argv("import", *[arg for c in changes for arg in ("--change", c)], "-", tag)
    done = subprocess.run(argv, stdin=tar.stdout, capture_output=True, text=True, env={**os.environ, **engine.env})
    if tar.stdout is not None:  # an import that stopped reading ends tar (EPIPE) instead of leaving it blocked
        tar.stdout.close()
    tar.wait()
    if done.returncode != 0 or tar.returncode != 0:
        raise EngineError(f"importing the stand-in rootfs failed (tar exit {tar.returncode}, import exit "
                          f"{done.returncode}): {done.stderr.strip()}")
