"""The compile sandbox: a client's program source can read nothing of the server.

* :func:`check_source` refuses, before anything is compiled, every preprocessor directive or operator that opens or
  probes a file of the server -- ``#include``, ``#include_next``, ``#import``, ``#embed`` (C23), ``__has_include``,
  ``__has_embed``, ``#pragma GCC dependency`` -- in any spelling the C preprocessor accepts (after line splices, with
  comments in front, with the ``%:`` digraph or the ``??=`` trigraph; C11 5.1.1.2 translation phases 1-3), naming the
  line. Kernels need no headers: the CPU compiler runs freestanding and NVRTC has CUDA's built-ins. The one
  exception is ``PUBLIC_HEADERS``: a device's toolkit headers that renderers include by name (tinygrad's CUDA
  renderer writes ``#include <cuda_fp16.h>`` for half-precision kernels), found only on the compiler's own include
  path of NVIDIA's public headers, never a path the client names.
* :func:`compiler_message` turns a ``CompileError`` into the diagnostics about the client's own source only: lines
  that name the source (``<stdin>:L:C:`` from clang/gcc, ``kernel.cu(L):`` from NVRTC) and the quoted source lines
  and carets after them, with the source called ``<source>``; command lines, paths and notes about other files of the
  server are left out.
* :func:`compiler_limits` bounds the address space a compile may add (``COMPILER_MEMORY_BYTES``); the compiler's run
  time is bounded by the compiler itself and by the server's batch deadline (``--max-kernel-seconds``).
"""

from __future__ import annotations

import contextlib
import re
import resource
from collections.abc import Iterator

from runtime_core.compiler import CompileError

__all__ = ["SourceRefused", "check_source", "compiler_message", "compiler_limits", "COMPILER_MEMORY_BYTES",
           "PUBLIC_HEADERS"]

PUBLIC_HEADERS: dict[str, frozenset[str]] = {"CUDA": frozenset({"cuda_fp16.h", "cuda_bf16.h"})}
"""Per device (name before any ``:``), the toolkit headers a source may include as ``#include <name>``."""

COMPILER_MEMORY_BYTES = 4 << 30
"""Address space a compile may add to the worker's (inherited by a compiler process it starts)."""
_SOURCE_NAMES = re.compile(r"^(?:<stdin>|kernel\.cu)(?=[:(]\d)")
_DIAGNOSTIC = re.compile(r"^\S[^:(]*(?::\d+:|\(\d+\):)")  # "file:12:" or "file(12):" starts a new diagnostic
_HASH = r"(?:#|%:|\?\?=)"
_DIRECTIVE = re.compile(rf"^\s*{_HASH}\s*(include_next|include|import|embed)\b|^\s*{_HASH}\s*pragma\s+GCC\s+dependency\b")
_PUBLIC_INCLUDE = re.compile(rf"^\s*{_HASH}\s*include\s*<([A-Za-z0-9_]+\.h)>\s*$")
_PROBE = re.compile(r"\b(__has_include_next|__has_include|__has_embed)\b")
_COMMENT_OR_STRING = re.compile(r'/\*.*?\*/|//[^\n]*|"(?:\\.|[^"\\\n])*"|\'(?:\\.|[^\'\\\n])*\'', re.S)
_MAX_MESSAGE_LINES = 200


class SourceRefused(ValueError):
    """A program source that asks the preprocessor for a file of the server; the message names the line."""


def check_source(source: str, public: frozenset[str] = frozenset()) -> None:
    """Refuse ``source`` if it includes, embeds or probes a file (see the module docstring), except an
    ``#include <name>`` of a header in ``public`` (``PUBLIC_HEADERS`` of the device); ``SourceRefused``."""
    text = source.replace("??/\n", "").replace("\\\r\n", "").replace("\\\n", "")
    spliced_lines = _original_lines(source)
    for index, line in enumerate(_blank_comments(text).split("\n")):
        if (m := _PUBLIC_INCLUDE.match(line)) and m.group(1) in public:
            continue
        if (m := _DIRECTIVE.search(line)) or (m := _PROBE.search(line)):
            what = (m.group(1) or "pragma GCC dependency").strip()
            raise SourceRefused(f"line {spliced_lines[index]}: {what} is not allowed: program sources are compiled "
                                f"without headers or files of the server; put everything the kernel needs in its "
                                f"source")


def _original_lines(source: str) -> list[int]:
    """The 1-based source line on which each logical line (after splicing ``\\``-newlines) starts."""
    starts, line = [1], 1
    pieces = re.split(r"(\?\?/\n|\\\r?\n|\n)", source)
    for sep in pieces[1::2]:
        line += 1
        if sep == "\n":
            starts.append(line)
    return starts


def _blank_comments(text: str) -> str:
    """``text`` with comments replaced by a space (newlines kept) and string literals emptied, so a directive after
    a comment is seen and one inside a string is not."""
    def blank(m: re.Match[str]) -> str:
        s = m.group(0)
        if s.startswith("/"):
            return " " + "\n" * s.count("\n")
        return s[0] * 2
    return _COMMENT_OR_STRING.sub(blank, text)


def compiler_message(error: CompileError) -> str:
    """The compiler's diagnostics about the client's source only (see the module docstring)."""
    kept: list[str] = []
    keeping = False
    for line in (error.stderr or "").splitlines():
        if _DIAGNOSTIC.match(line):
            keeping = bool(_SOURCE_NAMES.match(line))
            line = _SOURCE_NAMES.sub("<source>", line)
        if keeping and len(kept) < _MAX_MESSAGE_LINES:
            kept.append(line.rstrip())
    if kept:
        return "\n".join(kept)
    return "the compiler refused the source (its messages named no line of it; no other detail is given)"


@contextlib.contextmanager
def compiler_limits() -> Iterator[None]:
    """Within the block, this process (and a compiler it starts) may map at most ``COMPILER_MEMORY_BYTES`` more
    address space than it has now (``RLIMIT_AS``, soft limit); restored after."""
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    limit = _address_space() + COMPILER_MEMORY_BYTES
    if hard != resource.RLIM_INFINITY:
        limit = min(limit, hard)
    if soft != resource.RLIM_INFINITY:
        limit = min(limit, soft)
    resource.setrlimit(resource.RLIMIT_AS, (limit, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))


def _address_space() -> int:
    """Bytes of virtual memory this process has mapped (``VmSize`` of ``/proc/self/status``)."""
    with open("/proc/self/status", encoding="ascii") as f:
        for line in f:
            if line.startswith("VmSize:"):
                return int(line.split()[1]) * 1024
    raise OSError("/proc/self/status has no VmSize line")
