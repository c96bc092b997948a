"""C compiler driver of the CPU backend: C source -> ELF relocatable object for this host.

The object (not a linked image) is the compile artifact and what the compile cache stores, because linking needs the
addresses of host libm functions, which differ per process; ``execmem.ExecutableImage.load`` links it at load time.

The compiler is ``$CC`` (default ``clang``; ``CC=gcc`` works too). It is run as
``$CC -c -x c <flags> - -o <tmpdir>/kernel.o`` with the source on stdin and these flags:

    -O2 -fPIC -ffreestanding -fno-math-errno -nostdlib -ffp-contract=off -fno-stack-protector
    -fno-asynchronous-unwind-tables
    -march=native (x86-64) or -mcpu=native (AArch64, where Clang spells the native CPU option that way)
    -ffixed-x18 on AArch64 (x18 is the platform register on some AArch64 ABIs; kernels must not touch it)
    -fvect-cost-model=dynamic with GCC (its -O2 default, "very-cheap", vectorizes no loop that needs a run-time
    alias check, i.e. no kernel loop over buffers that might overlap)
    --target=<machine>-none-unknown-elf with Clang on a host that is not Linux (emit ELF whatever the host's default
    object format; on Linux the host target is ELF already and keeps the system headers, e.g. <math.h>, usable)

Kernels are plain C: signed overflow is undefined, as C says (the renderer computes wrapping IR arithmetic in unsigned
types); ``-ffreestanding`` makes ``<stdint.h>``, ``<stddef.h>`` and ``<float.h>`` available. A compiler whose
``--version`` first line does not mention clang is treated as GCC-compatible.
"""

from __future__ import annotations

import functools
import hashlib
import platform
import shutil
import subprocess
import tempfile
from pathlib import Path

from runtime_core.compiler import CompileError, Compiler
from runtime_core.config import CC

__all__ = ["ClangCompiler", "CompilerNotFoundError", "host_cpu_identity"]

COMPILE_TIMEOUT_S = 300
"""Seconds one compiler run may take before it is killed and ``CompileError`` raised."""
_BASE_FLAGS = ("-O2", "-fPIC", "-ffreestanding", "-fno-math-errno", "-nostdlib", "-ffp-contract=off",
               "-fno-stack-protector", "-fno-asynchronous-unwind-tables")


class CompilerNotFoundError(CompileError):
    """The C compiler named by ``$CC`` (or the default ``clang``) cannot be run."""


def _host_machine() -> str:
    machine = platform.machine().lower()
    machine = {"amd64": "x86_64", "arm64": "aarch64"}.get(machine, machine)
    if machine not in ("x86_64", "aarch64"):
        raise CompileError(f"the CPU backend generates code for x86_64 and aarch64 hosts only; this host is "
                           f"{platform.machine()!r}")
    return machine


@functools.cache
def host_cpu_identity() -> str:
    """A string naming this host's CPU model and features (what ``-march=native`` depends on).

    From /proc/cpuinfo: the first ``model name`` (x86) or ``CPU implementer``/``CPU part`` (Arm) lines, plus a
    sha256 prefix of the ``flags``/``Features`` line; ``platform.processor()`` where /proc/cpuinfo does not exist.
    """
    try:
        text = Path("/proc/cpuinfo").read_text()
    except FileNotFoundError:
        return f"{platform.machine()} {platform.processor()}"
    fields: dict[str, str] = {}
    for line in text.splitlines():
        key, _, value = line.partition(":")
        fields.setdefault(key.strip(), value.strip())
    model = fields.get("model name") or f"implementer {fields.get('CPU implementer')} part {fields.get('CPU part')}"
    features = fields.get("flags") or fields.get("Features") or ""
    return f"{model} features:{hashlib.sha256(features.encode()).hexdigest()[:16]}"


class ClangCompiler(Compiler):
    """Compiles C to an ELF64 relocatable object for this host with ``$CC`` (clang by default, or gcc).

    Args:
        cachekey: compile-cache namespace (None disables the on-disk cache).
        cc: compiler command or path; default ``$CC``, else ``clang``.

    Raises (at construction):
        CompilerNotFoundError: the compiler is not on PATH or does not answer ``--version``.
        CompileError: this host is neither x86-64 nor AArch64.
    """

    def __init__(self, cachekey: str | None = "cpu_elf_object", cc: str | None = None):
        super().__init__(cachekey)
        name = cc or CC.get() or "clang"
        path = shutil.which(name)
        if path is None:
            raise _not_found(name, "not found on PATH")
        self.cc = path
        self.machine = _host_machine()
        self.version = self._version_line()
        self.is_clang = "clang" in self.version.lower()
        native = "-march=native" if self.machine == "x86_64" else "-mcpu=native"
        self.flags: tuple[str, ...] = (*_BASE_FLAGS, native)
        if self.machine == "aarch64":
            self.flags += ("-ffixed-x18",)
        if not self.is_clang:
            self.flags += ("-fvect-cost-model=dynamic",)
        elif platform.system() != "Linux":
            self.flags += (f"--target={self.machine}-none-unknown-elf",)

    def _version_line(self) -> str:
        try:
            proc = subprocess.run([self.cc, "--version"], capture_output=True, text=True, timeout=60)
        except (OSError, subprocess.TimeoutExpired) as e:
            raise _not_found(self.cc, f"cannot be run ({e})") from e
        if proc.returncode != 0 or not proc.stdout.strip():
            raise _not_found(self.cc, f"`{self.cc} --version` failed (exit status {proc.returncode}): "
                                      f"{proc.stderr.strip()[:500]}")
        return proc.stdout.splitlines()[0].strip()

    def identity(self) -> str:
        """Compiler path, its ``--version`` first line, the flags and the host CPU (for the cache key)."""
        return f"{self.cc} | {self.version} | {' '.join(self.flags)} | {host_cpu_identity()}"

    def compile(self, src: str) -> bytes:
        """Compile C source ``src`` to the bytes of an ELF relocatable object.

        Raises:
            CompileError: the compiler exited non-zero (its stderr in ``.stderr`` and the message, ``src`` in
                ``.source``) or wrote no object or something that is not ELF (nothing is cached then).
            CompilerNotFoundError: the compiler disappeared since construction.
            CompileError: the compiler ran longer than ``COMPILE_TIMEOUT_S``.
        """
        with tempfile.TemporaryDirectory(prefix="runtime-cpu-cc-") as tmp:
            out = Path(tmp) / "kernel.o"
            cmd = [self.cc, "-c", "-x", "c", *self.flags, "-", "-o", str(out)]
            try:
                proc = subprocess.run(cmd, input=src.encode(), capture_output=True, timeout=COMPILE_TIMEOUT_S)
            except OSError as e:
                raise _not_found(self.cc, f"cannot be run ({e})") from e
            except subprocess.TimeoutExpired as e:
                raise CompileError(f"{' '.join(cmd)} did not finish within {COMPILE_TIMEOUT_S} s; the compiler hangs "
                                   f"or the kernel is far too large", source=src) from e
            stderr = proc.stderr.decode(errors="replace")
            if proc.returncode != 0:
                raise CompileError(f"{' '.join(cmd)} failed with exit status {proc.returncode} "
                                   f"({src.count(chr(10)) + 1} lines of C)", stderr=stderr, source=src)
            if not out.is_file():
                raise CompileError(f"{' '.join(cmd)} exited 0 but wrote no object file", stderr=stderr, source=src)
            obj = out.read_bytes()
            if not obj.startswith(b"\x7fELF"):
                raise CompileError(f"{' '.join(cmd)} exited 0 but wrote {len(obj)} bytes that are not an ELF object "
                                   f"(starting {obj[:16]!r}); is ${CC.name} a C compiler?", stderr=stderr, source=src)
            return obj


def _not_found(name: str, why: str) -> CompilerNotFoundError:
    return CompilerNotFoundError(
        f"C compiler {name!r} {why}. The CPU backend compiles kernels with ${CC.name} (default: clang). Install "
        f"clang (`apt-get install clang`) or gcc (`apt-get install gcc`) and/or set {CC.name}=clang or {CC.name}=gcc.")
