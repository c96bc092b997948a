"""The environment variables of runtime-core and of the backends in runtime-backends, declared once and parsed one way.

Every variable is a :class:`Setting`: name, kind (how its text is parsed), default and a one-line doc. Code reads a
variable with ``SETTING.get()`` at the moment it needs the value (tests change the environment between calls), and
this is the only module of the two packages that reads ``os.environ``. An unset or empty variable has its default;
any other text the kind cannot parse raises :class:`ConfigError` naming the variable, the text and the accepted forms.
Booleans accept ``1/0``, ``true/false``, ``yes/no``, ``on/off`` (any case), nothing else (``2`` is refused: a
typo must not pick a mode silently).

Another package (the harness, a third-party backend) declares its own settings with the same classes; the table in
docs/configuration.md is generated from :data:`SETTINGS` and the harness's and mock_gpu's declarations.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Generic, TypeVar

__all__ = ["ConfigError", "Kind", "Setting", "FLAG", "TEXT", "PATH", "SECONDS", "BYTES", "COUNT", "SETTINGS",
           "device_flag", "DEVICE_FLAG_NAME", "MOCKGPU", "CC", "CPU_THREADS", "CPU_MEMCHECK", "PTX", "DISK_IO_URING",
           "DISK_O_DIRECT", "HOST", "CLOUD_TOKEN", "CLOUDDEV", "CLOUD_TIMEOUT", "CLOUD_CONNECT_TIMEOUT",
           "RUNTIME_LRU_MAX_BYTES", "RUNTIME_CACHE_DB", "RUNTIME_DISABLE_COMPILE_CACHE", "environ_snapshot",
           "replace_environ"]

T = TypeVar("T", covariant=True)
_TRUE = frozenset({"1", "true", "yes", "on"})
_FALSE = frozenset({"0", "false", "no", "off"})


class ConfigError(ValueError):
    """An environment variable holds text its kind does not accept; the message names the variable, the text and the
    accepted forms."""


@dataclass(frozen=True)
class Kind(Generic[T]):
    """How a variable's text becomes a value: ``parse(text) -> value`` raises ``ValueError`` whose message says what
    is accepted; ``name`` is the type as the docs show it."""

    name: str
    parse: Callable[[str], T]


def _flag(text: str) -> bool:
    word = text.strip().lower()
    if word not in _TRUE and word not in _FALSE:
        raise ValueError("expected a boolean: 1/true/yes/on or 0/false/no/off")
    return word in _TRUE


def _int_at_least(low: int, unit: str) -> Callable[[str], int]:
    def parse(text: str) -> int:
        try:
            value = int(text.strip())
        except ValueError:
            value = low - 1
        if value < low:
            raise ValueError(f"expected an integer >= {low} ({unit})")
        return value
    return parse


def _seconds(text: str) -> float:
    try:
        value = float(text.strip())
    except ValueError:
        value = math.nan
    if not 0 < value < math.inf:
        raise ValueError("expected a positive number of seconds, e.g. 30 or 0.5")
    return value


FLAG: Kind[bool] = Kind("bool", _flag)
TEXT: Kind[str] = Kind("text", str.strip)
PATH: Kind[str] = Kind("path", str.strip)
SECONDS: Kind[float] = Kind("seconds", _seconds)
BYTES: Kind[int] = Kind("bytes (int >= 0)", _int_at_least(0, "bytes"))
COUNT: Kind[int] = Kind("int >= 1", _int_at_least(1, "a count"))


@dataclass(frozen=True)
class Setting(Generic[T]):
    """One environment variable: ``name``, ``kind``, ``default`` (the value when unset or empty; ``None`` where the
    value is worked out at run time, which ``default_doc`` then describes) and ``doc`` (one line)."""

    name: str
    kind: Kind[T]
    default: T
    doc: str
    default_doc: str = ""

    def get(self) -> T:
        """The variable's value now; ``ConfigError`` (naming the variable) for text the kind does not accept."""
        text = os.environ.get(self.name, "")
        return self.default if not text.strip() else self.parse(text)

    def parse(self, text: str, source: str | None = None) -> T:
        """``text`` parsed as this setting's kind; ``ConfigError`` names ``source`` (default: the variable), e.g. a
        command-line option that mirrors the variable."""
        try:
            return self.kind.parse(text)
        except ValueError as e:
            raise ConfigError(f"{source or self.name}={text!r}: {e} ({self.doc})") from None

    def is_set(self) -> bool:
        """Whether the variable is present in the environment (even if empty)."""
        return self.name in os.environ

    def shown_default(self) -> str:
        """The default as the docs show it."""
        if self.default_doc:
            return self.default_doc
        return "unset" if self.default is None else str(self.default)


def _device_flag_value(name: str) -> Setting[bool]:
    return Setting(name, FLAG, False, "make this backend Device.DEFAULT (CPU=1, CUDA=1, ...)")


def device_flag(backend: str) -> bool:
    """Whether ``$<backend>`` (``CPU=1``, ``CUDA=1``) asks for that backend as ``Device.DEFAULT``; ``ConfigError`` for
    text that is not a boolean."""
    return bool(_device_flag_value(backend).get())


DEVICE_FLAG_NAME = "<BACKEND>"
"""How the docs name the per-backend default-device flags (``CPU``, ``CUDA``, ...; one per registered backend)."""

RUNTIME_LRU_MAX_BYTES = Setting("RUNTIME_LRU_MAX_BYTES", BYTES, 1 << 30,
                                "bytes of freed buffers an LRU allocator keeps for reuse, per allocator")
RUNTIME_CACHE_DB = Setting("RUNTIME_CACHE_DB", PATH, None, "the sqlite3 file of the on-disk compile cache",
                           "<user cache dir>/runtime-core/compile_cache.db")
RUNTIME_DISABLE_COMPILE_CACHE = Setting("RUNTIME_DISABLE_COMPILE_CACHE", FLAG, False,
                                        "compile every source again instead of using the on-disk compile cache")
CC = Setting("CC", TEXT, "clang", "the C compiler of the CPU backend (clang or gcc, a name on PATH or a path)")
CPU_THREADS = Setting("CPU_THREADS", COUNT, None, "threads one CPU kernel launch may spread its groups over",
                      "the cores this process may run on")
CPU_MEMCHECK = Setting("CPU_MEMCHECK", FLAG, False,
                       "render bounds-checked CPU kernels: an out-of-bounds access raises OutOfBoundsError")
PTX = Setting("PTX", FLAG, False, "the CUDA backend renders PTX instead of CUDA C")
MOCKGPU = Setting("MOCKGPU", FLAG, False, "the CUDA backend drives the emulated GPU of mock_gpu, not the real driver")
DISK_IO_URING = Setting("DISK_IO_URING", FLAG, None, "large uncached DISK reads go through io_uring (true) or preadv "
                        "(false)", "io_uring for O_DIRECT reads, preadv in file order for buffered ones")
DISK_O_DIRECT = Setting("DISK_O_DIRECT", FLAG, None,
                        "large cold DISK reads bypass the page cache with O_DIRECT (true) or stay buffered (false)",
                        "each file gets what its storage does best (runtime_backends.disk.readpath)")
HOST = Setting("HOST", TEXT, None, "host:port of the CLOUD server; unset: CLOUD starts a server in a child process of this one")
CLOUD_TOKEN = Setting("CLOUD_TOKEN", TEXT, None, "shared token of the CLOUD server (sent as Authorization: Bearer)")
CLOUDDEV = Setting("CLOUDDEV", TEXT, None, "the device an in-process or `serve` CLOUD server serves",
                   "the first default device that opens (serve: CPU)")
CLOUD_TIMEOUT = Setting("CLOUD_TIMEOUT", SECONDS, 120.0, "how long a CLOUD client waits for an answer")
CLOUD_CONNECT_TIMEOUT = Setting("CLOUD_CONNECT_TIMEOUT", SECONDS, 30.0,
                                "how long a CLOUD client keeps trying to reach its server")

SETTINGS: tuple[Setting, ...] = (
    _device_flag_value(DEVICE_FLAG_NAME), RUNTIME_LRU_MAX_BYTES, RUNTIME_CACHE_DB, RUNTIME_DISABLE_COMPILE_CACHE, CC,
    CPU_THREADS, CPU_MEMCHECK, PTX, MOCKGPU, DISK_IO_URING, DISK_O_DIRECT, HOST, CLOUD_TOKEN, CLOUDDEV, CLOUD_TIMEOUT,
    CLOUD_CONNECT_TIMEOUT)
"""Every variable of runtime-core and runtime-backends, in the order the docs list them."""


def environ_snapshot(**changes: str) -> dict[str, str]:
    """This process's whole environment as it is now, with ``changes`` applied: what a child process (a CLOUD
    server, a session's worker) is started with, so it sees the variables exactly as they are here."""
    return {**os.environ, **changes}


def replace_environ(environ: Mapping[str, str]) -> None:
    """Make ``environ`` this process's whole environment (a forked worker taking its server's current one)."""
    os.environ.clear()
    os.environ.update(environ)
