"""The C compiler driver: flags, identity, errors, and the cached object through runtime_core's cache."""

from __future__ import annotations

import io
import platform
import shutil

import pytest
from elftools.elf.elffile import ELFFile

from runtime_backends.cpu.compiler import ClangCompiler, CompilerNotFoundError, host_cpu_identity
from runtime_core.compiler import CompileError

COMPILERS = [pytest.param(cc, marks=pytest.mark.skipif(shutil.which(cc) is None, reason=f"{cc} not installed"))
             for cc in ("clang", "gcc")]
HOST_EM = {"x86_64": "EM_X86_64", "aarch64": "EM_AARCH64"}.get(platform.machine())


@pytest.mark.parametrize("cc", COMPILERS)
def test_compiles_to_host_relocatable_object(cc):
    obj = ClangCompiler(cachekey=None, cc=cc).compile("int add(int a, int b) { return a + b; }\n")
    elf = ELFFile(io.BytesIO(obj))
    assert (elf["e_type"], elf["e_machine"]) == ("ET_REL", HOST_EM)
    assert [s.name for s in elf.get_section_by_name(".symtab").iter_symbols() if s.name == "add"] == ["add"]
    assert elf.get_section_by_name(".eh_frame") is None  # -fno-asynchronous-unwind-tables


@pytest.mark.parametrize("cc", COMPILERS)
def test_flags_and_identity(cc):
    comp = ClangCompiler(cachekey=None, cc=cc)
    for flag in ("-O2", "-fPIC", "-ffreestanding", "-fno-math-errno", "-nostdlib", "-fno-stack-protector",
                 "-fno-asynchronous-unwind-tables", "-ffp-contract=off"):
        assert flag in comp.flags
    assert any(f.endswith("=native") for f in comp.flags)
    assert "-fwrapv" not in comp.flags  # kernels are plain C; the renderer wraps in unsigned arithmetic
    assert ("-fvect-cost-model=dynamic" in comp.flags) == (cc == "gcc")
    assert not any(f.startswith("--target") for f in comp.flags)  # Linux: the host target is ELF
    ident = comp.identity()
    assert comp.cc in ident and comp.version in ident and " ".join(comp.flags) in ident
    assert host_cpu_identity() in ident


@pytest.mark.skipif(not (shutil.which("clang") and shutil.which("gcc")), reason="needs clang and gcc")
def test_cc_env_selects_compiler(monkeypatch):
    monkeypatch.setenv("CC", "gcc")
    gcc = ClangCompiler(cachekey=None)
    monkeypatch.delenv("CC")
    clang = ClangCompiler(cachekey=None)
    assert "gcc" in gcc.cc and "clang" in clang.cc and gcc.identity() != clang.identity()


@pytest.mark.parametrize("cc", COMPILERS)
def test_syntax_error_carries_stderr_and_source(cc):
    src = "int broken(int x) { return x +; }\n"
    with pytest.raises(CompileError) as info:
        ClangCompiler(cachekey=None, cc=cc).compile(src)
    err = info.value
    assert "error" in err.stderr and err.source == src
    assert "exit status" in str(err) and "expected expression" in str(err)


def test_missing_compiler_says_how_to_install(monkeypatch):
    monkeypatch.setenv("CC", "/nonexistent/bin/cc-that-is-not-there")
    with pytest.raises(CompilerNotFoundError, match=r"\$CC.*apt-get install clang"):
        ClangCompiler(cachekey=None)
    assert issubclass(CompilerNotFoundError, CompileError)


@pytest.mark.parametrize("cc", COMPILERS)
def test_compile_cached_returns_stored_object(cc, tmp_path, monkeypatch):
    monkeypatch.setenv("RUNTIME_CACHE_DB", str(tmp_path / "cache.db"))
    monkeypatch.delenv("RUNTIME_DISABLE_COMPILE_CACHE", raising=False)
    comp = ClangCompiler(cachekey="test_cpu_compiler", cc=cc)
    src = "float half(float x) { return x * 0.5f; }\n"
    first = comp.compile_cached(src)
    monkeypatch.setattr(comp, "compile", lambda s: pytest.fail("compile ran although the object was cached"))
    assert comp.compile_cached(src) == first
