"""Executable memory: W^X protections, lifetime, failure cleanup and the host-function whitelist."""

from __future__ import annotations

import ctypes
import ctypes.util
import gc
import platform
import shutil
import weakref

import pytest

from runtime_backends.cpu import execmem
from runtime_backends.cpu.compiler import ClangCompiler
from runtime_backends.cpu.execmem import LIBM_WHITELIST, ExecutableImage, host_resolver
from runtime_core.compiler import CompileError

pytestmark = pytest.mark.skipif(platform.machine() not in ("x86_64", "aarch64") or shutil.which("clang") is None
                                and shutil.which("gcc") is None, reason="needs an x86-64/AArch64 host and a compiler")
SRC = """
static int counter;
static const float scale[4] = {0.5f, 1.5f, 2.5f, 3.5f};
int bump(int d) { counter += d; return counter; }
float scaled(int i) { return scale[i & 3]; }
"""


def mappings() -> dict[int, str]:
    """start address -> permission string, from /proc/self/maps."""
    out = {}
    with open("/proc/self/maps") as f:
        for line in f:
            span, perms = line.split()[:2]
            out[int(span.split("-")[0], 16)] = perms
    return out


@pytest.fixture(scope="module")
def obj() -> bytes:
    return ClangCompiler(cachekey=None, cc="clang" if shutil.which("clang") else "gcc").compile(SRC)


def test_segments_get_w_xor_x_protections(obj):
    img = ExecutableImage.load(obj)
    maps = mappings()
    text, ro, data = img.base, img.base + 4096, img.base + 8192
    if execmem.mmap.PAGESIZE == 4096:
        assert (maps[text][:3], maps[ro][:3], maps[data][:3]) == ("r-x", "r--", "rw-")
    ours = [p for start, p in maps.items() if img.base <= start < img.base + img.size]
    assert ours and not any("w" in p and "x" in p for p in ours)
    assert img.function("bump", ctypes.c_int, [ctypes.c_int])(3) == 3
    assert img.function("bump", ctypes.c_int, [ctypes.c_int])(4) == 7
    assert [img.function("scaled", ctypes.c_float, [ctypes.c_int])(i) for i in range(4)] == [0.5, 1.5, 2.5, 3.5]


def test_function_keeps_image_mapped_and_close_unmaps(obj):
    img = ExecutableImage.load(obj)
    fn = img.function("bump", ctypes.c_int, [ctypes.c_int])
    ref, base = weakref.ref(img), img.base
    del img
    gc.collect()
    assert ref() is not None and fn(2) == 2  # still mapped through fn.image
    del fn
    gc.collect()
    assert ref() is None and base not in mappings()  # finalizer unmapped it
    img = ExecutableImage.load(obj)
    base = img.base
    img.close()
    img.close()
    assert img.closed and base not in mappings()
    with pytest.raises(ValueError, match="closed"):
        img.function("bump", ctypes.c_int, [ctypes.c_int])


def test_unknown_symbol_lists_defined_ones(obj):
    img = ExecutableImage.load(obj)
    with pytest.raises(KeyError, match=r"'nope' is not defined.*\['bump', 'scaled'\]"):
        img.address("nope")


def test_failed_link_leaves_nothing_mapped(obj, monkeypatch):
    src = "extern float not_whitelisted(float);\nfloat f(float x) { return not_whitelisted(x); }\n"
    bad = ClangCompiler(cachekey=None, cc="clang" if shutil.which("clang") else "gcc").compile(src)
    mapped: list[int] = []
    real_map = execmem._map
    monkeypatch.setattr(execmem, "_map", lambda size: mapped.append(real_map(size)) or mapped[-1])
    with pytest.raises(CompileError, match="not_whitelisted"):
        ExecutableImage.load(bad)
    assert len(mapped) == 1 and mapped[0] not in mappings()


def test_host_resolver_whitelist():
    libm = ctypes.CDLL(ctypes.util.find_library("m"))
    assert {"exp2", "exp2f", "log2", "log2f", "sin", "sinf", "sqrt", "sqrtf"} <= LIBM_WHITELIST
    assert host_resolver("exp2f") == ctypes.cast(libm.exp2f, ctypes.c_void_p).value
    assert host_resolver("memcpy") == ctypes.cast(ctypes.CDLL(ctypes.util.find_library("c")).memcpy,
                                                  ctypes.c_void_p).value
    for name in ("system", "printf", "exp2l", "malloc", ""):
        assert host_resolver(name) is None


@pytest.mark.skipif(platform.machine() != "x86_64" or shutil.which("clang") is None, reason="x86-64 host + clang")
def test_foreign_machine_object_is_refused():
    import subprocess
    import tempfile
    from pathlib import Path
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run(["clang", "--target=aarch64-none-elf", "-c", "-x", "c", "-", "-o", f"{tmp}/o.o"],
                       input=b"int f(void) { return 1; }", check=True)
        obj = Path(f"{tmp}/o.o").read_bytes()
    with pytest.raises(ValueError, match="object is for aarch64 but this host is x86_64"):
        ExecutableImage.load(obj)
