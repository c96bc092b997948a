"""Linker failures: each raises CompileError naming the relocation type, the symbol or the machine at fault."""

from __future__ import annotations

import io
import shutil
import struct
import subprocess
import tempfile
from pathlib import Path

import pytest
from elftools.elf.elffile import ELFFile

from runtime_backends.cpu.elf import RelocatableObject, image_size, link
from runtime_core.compiler import CompileError

pytestmark = pytest.mark.skipif(shutil.which("clang") is None, reason="clang not installed")
SOURCE = "extern float mystery(float);\nfloat f(float x) { return mystery(x) + 1.0f; }\n"


def compile_for(target: str, src: str = SOURCE) -> bytes:
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run(["clang", f"--target={target}", "-O2", "-fPIC", "-ffreestanding", "-c", "-x", "c", "-",
                        "-o", f"{tmp}/o.o"], input=src.encode(), capture_output=True, check=True)
        return Path(f"{tmp}/o.o").read_bytes()


def with_reloc_type(obj: bytes, symbol: str, new_type: int) -> bytes:
    """Copy of ``obj`` whose (first) relocation against ``symbol`` has its r_info type set to ``new_type``."""
    elf = ELFFile(io.BytesIO(obj))
    symtab = elf.get_section_by_name(".symtab")
    sec = elf.get_section_by_name(".rela.text")
    for i, r in enumerate(sec.iter_relocations()):
        if symtab.get_symbol(r["r_info_sym"]).name == symbol:
            at = sec["sh_offset"] + i * sec["sh_entsize"] + 8  # Elf64_Rela: r_offset, r_info, r_addend
            patched = bytearray(obj)
            struct.pack_into("<Q", patched, at, (r["r_info_sym"] << 32) | new_type)
            return bytes(patched)
    raise LookupError(symbol)


@pytest.mark.parametrize("target, new_type, name", [("x86_64-none-elf", 19, "R_X86_64_TLSGD"),
                                                    ("x86_64-none-elf", 41 + 100, "unknown relocation type 141"),
                                                    ("aarch64-none-elf", 541, "R_AARCH64_TLSIE_ADR_GOTTPREL_PAGE21")])
def test_unknown_relocation_type_is_named(target, new_type, name):
    obj = with_reloc_type(compile_for(target), "mystery", new_type)
    with pytest.raises(CompileError, match=rf"unsupported relocation type {name} against symbol mystery"):
        link(obj, 0x10000, {"mystery": 0x2000}.get, page_size=4096)


@pytest.mark.parametrize("target", ["x86_64-none-elf", "aarch64-none-elf"])
def test_unresolved_external_is_named(target):
    obj = compile_for(target)
    with pytest.raises(CompileError, match=r"undefined symbol\(s\) not known to the resolver: mystery"):
        link(obj, 0x10000, lambda name: None, page_size=4096)
    calls: list[str] = []
    linked = link(obj, 0x10000, lambda name: calls.append(name) or 0x3000, page_size=4096)
    assert calls == ["mystery"] and linked.symbols == {"f": 0}


def test_unsupported_machine_and_garbage():
    obj = bytearray(compile_for("x86_64-none-elf"))
    struct.pack_into("<H", obj, 18, 243)  # e_machine = EM_RISCV
    with pytest.raises(CompileError, match="unsupported ELF machine EM_RISCV"):
        image_size(bytes(obj))
    with pytest.raises(CompileError, match="cannot parse the object file"):
        image_size(b"not an elf file at all, just text")


def test_thread_local_storage_is_rejected():
    obj = compile_for("x86_64-none-elf", "_Thread_local int t;\nint get(void) { return t; }\n")
    with pytest.raises(CompileError, match="thread-local storage"):
        RelocatableObject(obj)


def test_weak_undefined_resolves_to_zero():
    obj = compile_for("x86_64-none-elf", "extern int maybe __attribute__((weak));\n"
                                         "int *get(void) { return &maybe; }\n")
    linked = link(obj, 0x10000, lambda name: None, page_size=4096)
    # the GOT slot for `maybe` (the only 8-byte word in the read-only segment) holds 0
    ro = next(s for s in linked.segments if not s.writable and not s.executable)
    assert linked.image[ro.offset:ro.offset + 8] == bytes(8)


def test_image_size_is_page_multiple_and_covers_regions():
    obj = compile_for("x86_64-none-elf", "static int d = 1; static int b[3000]; const int r[3] = {1, 2, 3};\n"
                                         "int f(int i) { b[i] += d; return b[i] + r[i % 3]; }\n")
    size = image_size(obj, page_size=4096)
    # text page, rodata page, data page (4 + 12000 bytes -> 3 pages)
    assert size == 4096 * (1 + 1 + 3)
    linked = link(obj, 0x10000, lambda name: None, page_size=4096)
    assert [(s.writable, s.executable) for s in linked.segments] == [(False, True), (False, False), (True, False)]
    assert linked.size == size and sum(s.size for s in linked.segments) == size
