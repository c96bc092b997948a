"""Compile time of the elementwise add kernel's rendered source: cold (``Compiler.compile``: the compiler runs every
time) and cached (``Compiler.compile_cached`` served from a warm sqlite cache in a fresh ``RUNTIME_CACHE_DB``).
Limits: for cold, compiling the empty kernel on the same device (the fixed cost of one compiler run; one group per
device, ``compile-cold-<device>``); for cached, one
indexed sqlite3 ``SELECT`` of a blob of the same size on an open connection (the floor of a sqlite-backed cache).
Peers: tinygrad 0.10.2 (PyPI ``tinygrad==0.10.2``) on the same op, an add of ``ADD_N`` float32: its CPU renderer's
source compiled by its ``ClangJITCompiler`` (in ``compile-cold-CPU``; tinygrad's compiler also links the object, which
ours leaves to load time) and served by its ``compile_cached`` from a warm sqlite cache of its own (in
``compile-cached``). They skip where tinygrad is not installed.
Unit: ms/compile. A compiler without a cache key (e.g. PYTHON's) has no cache: its "cached" entry measures
``compile_cached`` falling through to ``compile`` and records ``cached: False``."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest

from harness.benchmarks.kernels import GROUP, add_kernel, empty_kernel
from harness.benchmarks.measure import HOST, probe, record_time, run
from runtime_core.config import RUNTIME_CACHE_DB, RUNTIME_DISABLE_COMPILE_CACHE
from runtime_core.device import Device
from runtime_core.ir import Kernel

ADD_N = GROUP  # the source does not depend on the element count; the smallest valid one
TINYGRAD = pytest.mark.bench_role("peer", peer="tinygrad 0.10.2 (its CPU renderer's add of the same size, its clang "
                                              "compiler and compile cache)")


def _source(device: str, kernel: Kernel) -> str:
    renderer = Device[device].renderer
    if renderer is None or Device[device].compiler is None:
        pytest.skip(f"{device} has no renderer/compiler: nothing to compile")
    return renderer.render(kernel)


# the limit is the device's own compiler, so each device gets its own group (the report takes one limit per group)
@pytest.mark.benchmark(group="compile-cold-{device}")
@pytest.mark.parametrize("which", [
    "add", pytest.param("empty", id="limit_empty", marks=pytest.mark.bench_role("limit", reference="compile of the "
                                                                                 "empty kernel on the same device")),
])
def test_compile_cold(benchmark: Any, device: str, which: str) -> None:
    kernel = add_kernel(ADD_N) if which == "add" else empty_kernel()
    src, compiler = _source(device, kernel), Device[device].compiler
    lib, t = probe(lambda: compiler.compile(src))
    if not isinstance(lib, bytes) or not lib:
        pytest.fail(f"{device}: compile returned {type(lib).__name__} of length {len(lib)}, not non-empty bytes")
    run(benchmark, lambda: compiler.compile(src), t)
    record_time(benchmark, device, "ms/compile", kernel=kernel.name, source_chars=len(src))


@pytest.mark.benchmark(group="compile-cached")
def test_compile_cached(benchmark: Any, device: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(RUNTIME_CACHE_DB.name, str(tmp_path / "cache.db"))
    monkeypatch.delenv(RUNTIME_DISABLE_COMPILE_CACHE.name, raising=False)
    kernel = add_kernel(ADD_N)
    src, compiler = _source(device, kernel), Device[device].compiler
    lib = compiler.compile_cached(src)  # warms the cache
    cached = compiler.cachekey is not None
    if cached:  # every timed call must be a hit: compiling now would be a bug
        def refuse(_: str) -> bytes:
            raise RuntimeError(f"{device}: compile_cached recompiled a source it had just cached")
        monkeypatch.setattr(compiler, "compile", refuse)
    again, t = probe(lambda: compiler.compile_cached(src))
    if again != lib:
        pytest.fail(f"{device}: compile_cached returned {len(again)} bytes, the first compile {len(lib)} bytes")
    run(benchmark, lambda: compiler.compile_cached(src), t)
    record_time(benchmark, device, "ms/compile", kernel=kernel.name, cached=cached, size_bytes=len(lib))


@pytest.mark.benchmark(group="compile-cached")
@pytest.mark.bench_role("limit", reference="indexed sqlite3 SELECT of a 4 KiB blob on an open connection")
def test_compile_cached_limit_sqlite_select(benchmark: Any, tmp_path: Path) -> None:
    nbytes = 4096  # the order of a small kernel's object file
    blob = bytes(range(256)) * (nbytes // 256)
    conn = sqlite3.connect(tmp_path / "limit.db", isolation_level=None)
    try:
        conn.execute("CREATE TABLE t (key TEXT PRIMARY KEY, lib BLOB NOT NULL)")
        conn.execute("INSERT INTO t VALUES (?, ?)", ("k" * 64, blob))

        def select() -> bytes:
            return conn.execute("SELECT lib FROM t WHERE key = ?", ("k" * 64,)).fetchone()[0]

        if select() != blob:
            pytest.fail("sqlite3 returned a different blob than it stored")
        benchmark(select)
    finally:
        conn.close()
    record_time(benchmark, HOST, "ms/compile", size_bytes=nbytes)


def _tinygrad_add(monkeypatch: pytest.MonkeyPatch, cache_db: Path) -> tuple[Any, str]:
    """tinygrad's CPU compiler and its rendered source of the same add, with tinygrad's compile cache in ``cache_db``."""
    tinygrad = pytest.importorskip("tinygrad", reason="the peer is tinygrad 0.10.2: pip install tinygrad==0.10.2")
    from tinygrad import helpers
    from tinygrad.engine.realize import CompiledRunner, lower_schedule_item
    from tinygrad.runtime.ops_cpu import ClangJITCompiler
    # tinygrad reads CACHEDB at import and remembers its connection and the tables it created: start them afresh
    monkeypatch.setattr(helpers, "CACHEDB", str(cache_db))
    monkeypatch.setattr(helpers, "_db_connection", None)
    monkeypatch.setattr(helpers, "_db_tables", set())
    a, b = (tinygrad.Tensor.empty(ADD_N, device="CPU") for _ in range(2))
    (item,) = (a + b).schedule()
    runner = lower_schedule_item(item).prg
    if not isinstance(runner, CompiledRunner):
        pytest.fail(f"tinygrad lowered its add to a {type(runner).__name__}, not a compiled kernel")
    return ClangJITCompiler(), runner.p.src


@pytest.mark.benchmark(group="compile-cold-CPU")
@TINYGRAD
def test_compile_cold_peer_tinygrad(benchmark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    compiler, src = _tinygrad_add(monkeypatch, tmp_path / "tinygrad.db")
    lib, t = probe(lambda: compiler.compile(src))
    if not isinstance(lib, bytes) or not lib:
        pytest.fail(f"tinygrad's compile returned {type(lib).__name__}, not non-empty bytes")
    run(benchmark, lambda: compiler.compile(src), t)
    record_time(benchmark, HOST, "ms/compile", kernel="tinygrad add", source_chars=len(src))


@pytest.mark.benchmark(group="compile-cached")
@TINYGRAD
def test_compile_cached_peer_tinygrad(benchmark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    compiler, src = _tinygrad_add(monkeypatch, tmp_path / "tinygrad.db")
    lib = compiler.compile_cached(src)
    def refuse(_: str) -> bytes:
        raise RuntimeError("tinygrad's compile_cached recompiled a source it had just cached")
    monkeypatch.setattr(compiler, "compile", refuse)
    if compiler.compile_cached(src) != lib:
        pytest.fail("tinygrad's compile_cached returned other bytes than it cached")
    benchmark(lambda: compiler.compile_cached(src))
    record_time(benchmark, HOST, "ms/compile", kernel="tinygrad add", size_bytes=len(lib))
