"""The on-disk compile cache with each selected backend's real compiler, in a private RUNTIME_CACHE_DB."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from runtime_core.compiler import Compiler
from runtime_core.device import Device
from runtime_core.dtype import dtypes
from runtime_core.ir import Kernel, KernelBuilder


@pytest.fixture
def cache_db(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "cache" / "compile_cache.db"
    monkeypatch.setenv("RUNTIME_CACHE_DB", str(path))
    monkeypatch.delenv("RUNTIME_DISABLE_COMPILE_CACHE", raising=False)
    return path


def _compiler(device: str) -> Compiler:
    compiler = Device[device].compiler
    if compiler is None:
        pytest.skip(f"{device} has no compiler")
    if compiler.cachekey is None:
        pytest.skip(f"{device}'s compiler {type(compiler).__name__} does not use the compile cache (cachekey=None)")
    return compiler


def _kernel(tag: int) -> Kernel:
    """A small kernel whose source differs per ``tag``: out[i] = a[i] * tag + 1."""
    kb = KernelBuilder(f"cache_probe_{tag}", (16,))
    a, out = kb.buffer(dtypes.float32), kb.buffer(dtypes.float32)
    i = kb.global_id(0)
    kb.store(out, i, kb.add(kb.mul(kb.load(a, i), float(tag)), 1.0))
    return kb.build()


def _source(device: str, tag: int) -> str:
    return Device[device].renderer.render(_kernel(tag))  # type: ignore[union-attr]


class _Counter:
    """Replaces ``compiler.compile`` on the instance and counts the real compiles."""

    def __init__(self, compiler: Compiler, monkeypatch: pytest.MonkeyPatch) -> None:
        self.calls = 0
        self.real = compiler.compile
        monkeypatch.setattr(compiler, "compile", self)

    def __call__(self, src: str) -> bytes:
        self.calls += 1
        return self.real(src)


def _rows(db: Path) -> int:
    with sqlite3.connect(db) as conn:
        return conn.execute("SELECT COUNT(*) FROM compiled").fetchone()[0]


def test_hit_returns_same_bytes_without_compiling(device: str, cache_db: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    compiler, src = _compiler(device), _source(device, 3)
    counter = _Counter(compiler, monkeypatch)
    first = compiler.compile_cached(src)
    second = compiler.compile_cached(src)
    assert counter.calls == 1
    assert second == first and len(first) > 0
    assert _rows(cache_db) == 1
    compiler.compile_cached(_source(device, 4))  # another source is another entry
    assert counter.calls == 2 and _rows(cache_db) == 2


def test_corrupt_cache_file_is_bypassed(device: str, cache_db: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    compiler, src = _compiler(device), _source(device, 5)
    cache_db.parent.mkdir(parents=True)
    cache_db.write_bytes(b"this is not an sqlite database\0" * 64)
    counter = _Counter(compiler, monkeypatch)
    lib = compiler.compile_cached(src)
    assert counter.calls == 1 and len(lib) > 0
    Device[device].runtime(_kernel(5).name, lib)  # the recompiled binary loads


def test_corrupt_entry_is_recompiled_and_replaced(device: str, cache_db: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    compiler, src = _compiler(device), _source(device, 6)
    counter = _Counter(compiler, monkeypatch)
    good = compiler.compile_cached(src)
    with sqlite3.connect(cache_db) as conn:
        conn.execute("UPDATE compiled SET lib = ?", (b"\x7fELF garbage",))
    assert compiler.compile_cached(src) == good and counter.calls == 1  # this thread read it intact: its memo serves
    again: list[bytes] = []
    reader = threading.Thread(target=lambda: again.append(compiler.compile_cached(src)))  # one that reads the database
    reader.start()
    reader.join()
    assert again == [good] and counter.calls == 2
    with sqlite3.connect(cache_db) as conn:  # the entry was rewritten intact
        assert conn.execute("SELECT lib FROM compiled").fetchone()[0] == good


def test_disable_env_compiles_every_time(device: str, cache_db: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    compiler, src = _compiler(device), _source(device, 7)
    monkeypatch.setenv("RUNTIME_DISABLE_COMPILE_CACHE", "1")
    counter = _Counter(compiler, monkeypatch)
    compiler.compile_cached(src)
    compiler.compile_cached(src)
    assert counter.calls == 2
    assert not cache_db.exists() or _rows(cache_db) == 0


def test_key_depends_on_identity_cachekey_and_source(device: str, cache_db: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    compiler, src = _compiler(device), _source(device, 8)
    key = compiler.cache_key(src)
    assert compiler.cache_key(src) == key
    assert compiler.cache_key(_source(device, 9)) != key
    counter = _Counter(compiler, monkeypatch)
    compiler.compile_cached(src)
    identity = compiler.identity()
    monkeypatch.setattr(compiler, "identity", lambda: identity + " -O0")  # e.g. different flags
    assert compiler.cache_key(src) != key
    compiler.compile_cached(src)
    assert counter.calls == 2  # a different identity misses the cache
    monkeypatch.setattr(compiler, "identity", lambda: identity)
    monkeypatch.setattr(compiler, "cachekey", compiler.cachekey + "-other")
    assert compiler.cache_key(src) != key


_WORKER = """
import hashlib, importlib, json, sys
from runtime_core.device import Device
backend, (module, _, qualname) = sys.argv[1].partition(":")[0], sys.argv[3].partition(":")
if backend not in Device.backends():  # registered with Device.register in the parent, not by an entry point
    Device.register(backend, getattr(importlib.import_module(module), qualname))
compiler = Device[sys.argv[1]].compiler
for src in json.loads(open(sys.argv[2]).read()):
    print(hashlib.sha256(compiler.compile_cached(src)).hexdigest())
"""


def test_two_processes_compile_into_one_cache(device: str, cache_db: Path, tmp_path: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    compiler = _compiler(device)
    sources = [_source(device, t) for t in range(20, 24)]
    src_file = tmp_path / "sources.json"
    src_file.write_text(json.dumps(sources))
    cls = type(Device[device])
    argv = [sys.executable, "-c", _WORKER, device, str(src_file), f"{cls.__module__}:{cls.__qualname__}"]
    procs = [subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(2)]
    results = [p.communicate(timeout=120) for p in procs]
    for p, (out, err) in zip(procs, results):
        assert p.returncode == 0, f"worker failed:\n{err}"
        assert len(out.split()) == len(sources)
    assert _rows(cache_db) == len(sources)
    counter = _Counter(compiler, monkeypatch)
    for src in sources:
        assert len(compiler.compile_cached(src)) > 0
    assert counter.calls == 0  # every entry the two processes wrote is intact
