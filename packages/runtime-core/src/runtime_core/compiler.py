"""Compilers and the on-disk compile cache."""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import sqlite3
import threading
from collections.abc import Callable
from pathlib import Path

import platformdirs

from runtime_core.config import RUNTIME_CACHE_DB, RUNTIME_DISABLE_COMPILE_CACHE

__all__ = ["Compiler", "CompileError", "cache_path", "cache_enabled"]

log = logging.getLogger(__name__)

_SCHEMA_VERSION = 1


class CompileError(RuntimeError):
    """A program failed to compile or load.

    Attributes:
        stderr: what the compiler printed on its error stream ("" when not applicable).
        source: the source that failed ("" when not applicable).
    """

    def __init__(self, message: str, *, stderr: str = "", source: str = "") -> None:
        detail = f"{message}\n--- compiler output ---\n{stderr.rstrip()}" if stderr.strip() else message
        super().__init__(detail)
        self.stderr, self.source = stderr, source


def cache_path() -> Path:
    """Path of the sqlite3 compile cache: ``$RUNTIME_CACHE_DB`` or ``<user cache dir>/runtime-core/compile_cache.db``."""
    if path := RUNTIME_CACHE_DB.get():
        return Path(path)
    return Path(platformdirs.user_cache_dir("runtime-core")) / "compile_cache.db"


def cache_enabled() -> bool:
    """False when ``$RUNTIME_DISABLE_COMPILE_CACHE`` is true; ``ConfigError`` when it is not a boolean."""
    return not RUNTIME_DISABLE_COMPILE_CACHE.get()


class Compiler:
    """Turns rendered source into a binary a backend's runtime can load.

    Subclasses implement :meth:`compile` and :meth:`identity`. :meth:`compile_cached` memoizes ``compile`` in a sqlite3
    database shared by all processes of the user; the key is a sha256 of ``cachekey``, :meth:`identity` (compiler path,
    version, flags and target) and the source. A missing, locked, corrupt or unreadable cache is logged and bypassed
    (the source is compiled), never fatal. ``cachekey=None`` disables caching for this compiler. Each thread also keeps
    the entries it has read intact or written in memory, so a repeated hit costs a dictionary lookup, not a SELECT.
    """

    def __init__(self, cachekey: str | None = None) -> None:
        self.cachekey = cachekey

    def compile(self, src: str) -> bytes:
        """Compile ``src``; raise :class:`CompileError` with the compiler's output on failure."""
        raise NotImplementedError(f"{type(self).__name__} must implement compile")

    def identity(self) -> str:
        """Everything besides the source that determines the output: compiler, version, flags, target."""
        return type(self).__qualname__

    def cache_key(self, src: str) -> str:
        """Hex sha256 key of ``src`` under this compiler's identity. Raises ValueError when ``src`` is no UTF-8 text
        (a lone surrogate: no compiler could read it either)."""
        h = hashlib.sha256()
        for part in (str(_SCHEMA_VERSION), self.cachekey or "", self.identity(), src):
            try:
                h.update(part.encode())
            except UnicodeEncodeError as exc:
                raise ValueError(f"the source is not UTF-8 text: {exc.reason} at character {exc.start}") from None
            h.update(b"\0")
        return h.hexdigest()

    def compile_cached(self, src: str) -> bytes:
        """Like :meth:`compile`, served from the on-disk cache when an intact entry exists.

        Raises ``TypeError`` when ``src`` is not a ``str``, and whatever :meth:`compile` raises (nothing is cached then).
        """
        if not isinstance(src, str):
            raise TypeError(f"source must be a str, got {type(src).__name__}")
        if self.cachekey is None or not cache_enabled():
            return self.compile(src)
        memo_key = (self.cachekey, self.identity(), src)
        if (lib := _cache_get(memo_key, self.cache_key)) is not None:
            return lib
        lib = self.compile(src)
        _cache_put(memo_key, self.cache_key(src), lib)
        return lib


MemoKey = tuple[str, str, str]
"""(cachekey, identity, source): what an entry is compiled from, before hashing."""
_MEMO_ENTRIES = 4096


class _Connections(threading.local):
    """One sqlite connection per thread (sqlite3 connections are not shared across threads), reopened after a fork or
    when ``$RUNTIME_CACHE_DB`` points elsewhere. Keeping it open saves the connect, PRAGMA and CREATE TABLE of every
    lookup and the WAL checkpoint that closing the last connection runs.

    ``memo`` keeps the entries this thread has read intact or written, by :data:`MemoKey`, so a hit needs neither the
    sha256 of the source nor the blob's transfer and digest. An entry stays valid whatever other processes write: its
    key is everything the compile depends on, so another process can only store an equally valid binary for it. A
    process that wants a fresh compile after the database was deleted starts anew, as with any in-process cache.
    """

    key: tuple[int, str | None] | None = None
    conn: sqlite3.Connection | None = None
    file: tuple[int, int] | None = None  # (st_dev, st_ino) of the database the connection opened

    def __init__(self) -> None:
        self.memo: dict[MemoKey, bytes] = {}

    def get(self) -> sqlite3.Connection:
        key = (os.getpid(), RUNTIME_CACHE_DB.get())
        if self.conn is None or self.key != key:
            # a connection from the parent process is abandoned, not closed
            path = cache_path()
            self.conn, self.key, self.memo = _connect(path), key, {}
            self.file = _file_id(path)
        return self.conn

    def for_writing(self) -> sqlite3.Connection:
        """``get``, reconnecting first when the database file was deleted or replaced since it was opened: sqlite
        would write into the unlinked file, and the entry would be lost without a word (logged at INFO)."""
        conn = self.get()
        if _file_id(cache_path()) != self.file:
            log.info("compile cache %s was deleted or replaced while open; reopening it", cache_path())
            self.drop()
            conn = self.get()
        return conn

    def remember(self, memo_key: MemoKey, lib: bytes) -> None:
        """Keep ``lib`` for ``memo_key``; the memo starts over past ``_MEMO_ENTRIES`` entries."""
        if len(self.memo) >= _MEMO_ENTRIES:
            self.memo = {}
        self.memo[memo_key] = lib

    def drop(self) -> None:
        """Forget the connection after an error, so the next lookup reconnects."""
        if self.conn is not None and self.key is not None and self.key[0] == os.getpid():
            with contextlib.suppress(sqlite3.Error):
                self.conn.close()
        self.conn = self.key = None
        self.memo = {}


_connections = _Connections()


def _file_id(path: Path) -> tuple[int, int] | None:
    """(st_dev, st_ino) of ``path``, None when it does not exist."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return None
    return st.st_dev, st.st_ino


_LOCK_WAIT_S = 5.0  # how long a write waits for another process's lock before the result goes uncached (logged)


def _connect(path: Path) -> sqlite3.Connection:
    path.parent.mkdir(parents=True, exist_ok=True)
    conn = sqlite3.connect(path, timeout=_LOCK_WAIT_S, isolation_level=None, check_same_thread=True)
    try:
        with contextlib.suppress(sqlite3.OperationalError):  # WAL is an optimisation; some filesystems refuse it
            conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("CREATE TABLE IF NOT EXISTS compiled (key TEXT PRIMARY KEY, digest TEXT NOT NULL, lib BLOB NOT NULL)")
    except BaseException:
        conn.close()
        raise
    return conn


def _cache_get(memo_key: MemoKey, cache_key: Callable[[str], str]) -> bytes | None:
    """The intact entry of ``memo_key`` (from the memo, else the database by ``cache_key(source)``), or None."""
    try:
        conn = _connections.get()
        if (lib := _connections.memo.get(memo_key)) is not None:
            return lib
        key = cache_key(memo_key[2])
        row = conn.execute("SELECT digest, lib FROM compiled WHERE key = ?", (key,)).fetchone()
    except (sqlite3.Error, OSError) as e:
        _connections.drop()
        log.warning("compile cache %s unreadable (%s); compiling without it", cache_path(), e)
        return None
    if row is None:
        return None
    digest, lib = row
    if not isinstance(lib, bytes) or hashlib.sha256(lib).hexdigest() != digest:
        log.warning("compile cache entry %s is corrupt; recompiling", key[:12])
        return None
    lib = bytes(lib)
    _connections.remember(memo_key, lib)
    return lib


def _cache_put(memo_key: MemoKey, key: str, lib: bytes) -> None:
    try:
        _connections.for_writing().execute("INSERT OR REPLACE INTO compiled (key, digest, lib) VALUES (?, ?, ?)",
                                   (key, hashlib.sha256(lib).hexdigest(), lib))
        _connections.remember(memo_key, lib)
    except (sqlite3.Error, OSError) as e:
        _connections.drop()
        log.warning("compile cache %s not writable (%s); result not cached", cache_path(), e)
