import sqlite3
import subprocess
import sys
import textwrap

import pytest

from runtime_core.compiler import CompileError, Compiler, cache_path


class Echo(Compiler):
    def __init__(self, flags="-O2"):
        super().__init__("echo")
        self.flags, self.calls = flags, 0

    def identity(self):
        return f"echo {self.flags}"

    def compile(self, src):
        self.calls += 1
        if "error" in src:
            raise CompileError("bad source", stderr="line 1: error", source=src)
        return f"{self.flags}:{src}".encode()


@pytest.fixture(autouse=True)
def cache_db(tmp_path, monkeypatch):
    db = tmp_path / "cache.db"
    monkeypatch.setenv("RUNTIME_CACHE_DB", str(db))
    monkeypatch.delenv("RUNTIME_DISABLE_COMPILE_CACHE", raising=False)
    return db


def test_hit_returns_same_bytes_without_compiling():
    c = Echo()
    assert c.compile_cached("a") == b"-O2:a"
    assert Echo().compile_cached("a") == b"-O2:a"
    c2 = Echo()
    c2.compile_cached("a")
    assert c2.calls == 0


def test_key_includes_identity_and_source():
    assert Echo("-O2").cache_key("a") != Echo("-O3").cache_key("a")
    assert Echo().cache_key("a") != Echo().cache_key("b")
    c = Echo("-O3")
    assert c.compile_cached("a") == b"-O3:a" and c.calls == 1


def test_disabled_by_env(monkeypatch):
    monkeypatch.setenv("RUNTIME_DISABLE_COMPILE_CACHE", "1")
    c = Echo()
    c.compile_cached("a")
    c.compile_cached("a")
    assert c.calls == 2 and not cache_path().exists()


def test_corrupt_entry_is_recompiled(cache_db):
    c = Echo()
    c.compile_cached("a")
    with sqlite3.connect(cache_db) as conn:
        conn.execute("UPDATE compiled SET lib = ?", (b"garbage",))
    assert c.compile_cached("a") == b"-O2:a" and c.calls == 1  # this thread read it intact: its memo still serves
    import threading
    c2 = Echo()
    t = threading.Thread(target=lambda: c2.compile_cached("a"))  # a thread (or process) reading the corrupt entry
    t.start()
    t.join()
    assert c2.calls == 1 and Echo().compile_cached("a") == b"-O2:a"
    with sqlite3.connect(cache_db) as conn:  # and the recompiled binary replaced it
        assert conn.execute("SELECT lib FROM compiled").fetchone()[0] == b"-O2:a"


def test_corrupt_database_file_is_not_fatal(cache_db):
    cache_db.write_bytes(b"this is not a sqlite database" * 100)
    c = Echo()
    assert c.compile_cached("a") == b"-O2:a" and c.calls == 1


def test_compile_error_carries_stderr_and_source():
    with pytest.raises(CompileError, match="line 1: error") as e:
        Echo().compile_cached("error here")
    assert e.value.source == "error here" and e.value.stderr == "line 1: error"


def test_concurrent_processes_share_the_cache(cache_db):
    script = textwrap.dedent("""
        import sys
        from runtime_core.compiler import Compiler
        class C(Compiler):
            def identity(self): return "c"
            def compile(self, src): return src.encode() * 100
        c = C("conc")
        for i in range(40):
            assert c.compile_cached(f"src{i % 10}") == f"src{i % 10}".encode() * 100
    """)
    procs = [subprocess.Popen([sys.executable, "-c", script], env={"RUNTIME_CACHE_DB": str(cache_db),
                                                                   "PATH": "/usr/bin:/bin"}) for _ in range(4)]
    assert [p.wait(timeout=60) for p in procs] == [0, 0, 0, 0]
    with sqlite3.connect(cache_db) as conn:
        assert conn.execute("SELECT COUNT(*) FROM compiled").fetchone()[0] == 10


def test_lookups_reuse_one_connection_per_thread(monkeypatch):
    connects = []
    real = sqlite3.connect
    monkeypatch.setattr(sqlite3, "connect", lambda *a, **k: connects.append(a) or real(*a, **k))
    c = Echo()
    for _ in range(5):
        c.compile_cached("a")
    assert len(connects) == 1 and c.calls == 1

    import threading
    seen = []
    t = threading.Thread(target=lambda: seen.append(Echo().compile_cached("a")))
    t.start()
    t.join()
    assert seen == [b"-O2:a"] and len(connects) == 2  # sqlite connections are per thread


def test_a_new_cache_path_opens_a_new_connection(tmp_path, monkeypatch):
    c = Echo()
    c.compile_cached("a")
    monkeypatch.setenv("RUNTIME_CACHE_DB", str(tmp_path / "other.db"))
    assert c.compile_cached("a") == b"-O2:a" and c.calls == 2  # nothing of the first database leaks into the second
    assert (tmp_path / "other.db").exists()


def test_a_database_deleted_while_open_is_recreated_before_the_next_write(cache_db):
    """sqlite keeps writing into an unlinked file: the entry would vanish. The next write reopens the path instead."""
    assert Echo().compile_cached("a") == b"-O2:a"
    cache_db.unlink()
    for suffix in ("-wal", "-shm"):
        cache_db.with_name(cache_db.name + suffix).unlink(missing_ok=True)
    assert Echo().compile_cached("b") == b"-O2:b"
    with sqlite3.connect(cache_db) as conn:
        rows = conn.execute("SELECT lib FROM compiled").fetchall()
    assert rows == [(b"-O2:b",)]


def test_a_source_that_is_no_utf8_text_is_a_value_error_naming_the_character():
    with pytest.raises(ValueError, match="not UTF-8 text: surrogates not allowed at character 2"):
        Echo().compile_cached("ab\ud800")
