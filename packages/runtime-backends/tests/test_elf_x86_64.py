"""x86-64: objects from clang and gcc linked by runtime_backends.cpu.elf, loaded by execmem and executed via ctypes.

Each scenario compiles tests/elf_sources/kernels.c (or a small assembly file), links it, calls one function and compares
with a value computed here in Python. Link-only scenarios decode the patched fields and compare them with addresses
computed from the symbol table.
"""

from __future__ import annotations

import ctypes
import io
import math
import platform
import shutil
import struct
import subprocess
import tempfile
from pathlib import Path

import numpy as np
import pytest
from elftools.elf.elffile import ELFFile
from elftools.elf.relocation import RelocationSection

from runtime_backends.cpu.compiler import ClangCompiler
from runtime_backends.cpu.elf import RelocatableObject, _type_name
from runtime_backends.cpu.execmem import ExecutableImage
from runtime_core.compiler import CompileError

SOURCES = Path(__file__).parent / "elf_sources"
pytestmark = pytest.mark.skipif(platform.machine() not in ("x86_64", "AMD64"), reason="executes x86-64 code")
COMPILERS = [pytest.param(cc, marks=pytest.mark.skipif(shutil.which(cc) is None, reason=f"{cc} not installed"))
             for cc in ("clang", "gcc")]
# extra flags -> which GOT relocation flavour the object gets
VARIANTS = {"default": (), "no-plt": ("-fno-plt",), "no-relax": ("-fno-plt", "-Wa,-mrelax-relocations=no")}
I, F, D = ctypes.c_int, ctypes.c_float, ctypes.c_double


def run_cc(*args: str) -> bytes:
    """Run a compiler command line that ends with ``-o``; returns the object it wrote."""
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run([*args, f"{tmp}/out.o"], capture_output=True, check=True)
        return Path(f"{tmp}/out.o").read_bytes()


def compile_c(cc: str, path: Path, *extra: str) -> bytes:
    """Compile ``path`` with the driver's exact flags plus ``extra``; returns the object bytes."""
    comp = ClangCompiler(cachekey=None, cc=cc)
    return run_cc(comp.cc, "-c", "-x", "c", *comp.flags, *extra, str(path), "-o")


def reloc_types(obj: bytes) -> set[str]:
    elf = ELFFile(io.BytesIO(obj))
    return {_type_name("EM_X86_64", r["r_info_type"]) for s in elf.iter_sections() if isinstance(s, RelocationSection)
            and not s.name.startswith(".rela.eh_frame") for r in s.iter_relocations()}


@pytest.fixture(scope="module", params=[(cc, v) for cc in ("clang", "gcc") for v in VARIANTS],
                ids=lambda p: f"{p[0]}-{p[1]}")
def kernels(request) -> tuple[ExecutableImage, set[str]]:
    cc, variant = request.param
    if shutil.which(cc) is None:
        pytest.skip(f"{cc} not installed")
    obj = compile_c(cc, SOURCES / "kernels.c", *VARIANTS[variant])
    return ExecutableImage.load(obj), reloc_types(obj)


def test_jump_table_switch(kernels):
    img, _ = kernels
    jump = img.function("jump", I, [I, I])
    ref = [lambda x: x * 3 + 1, lambda x: x ^ 0x55, lambda x: (x << 3) - 7, lambda x: int(x / 5) + 11,
           lambda x: int(math.fmod(x, 7)) - 2, lambda x: ~x + 100, lambda x: x * x - 9, lambda x: (x >> 2) | 0x40,
           lambda x: x + 12345]
    for k in range(-1, 11):
        for x in (-37, 0, 5, 1234):
            assert jump(k, x) == (ref[k](x) if 0 <= k < len(ref) else -1), (k, x)


def test_constant_pools(kernels):
    img, _ = kernels
    xs = np.array([-2.5, 0.0, 1.0, 3.75], dtype=np.float32)
    for x in xs:
        # -march=native may contract to an FMA (one rounding) or not (two); both are exact references
        fused = np.float32(np.float64(x) * np.float64(np.float32(1.2345)) + 3.5)
        separate = np.float32(x * np.float32(1.2345)) + np.float32(3.5)
        assert np.float32(img.function("poly_f", F, [F])(float(x))) in (fused, separate), x
    got_d = [img.function("poly_d", D, [D])(float(x)) for x in xs]
    np.testing.assert_allclose(got_d, xs.astype(np.float64) * 0.123456789 - 2.75, rtol=1e-15, atol=1e-15)


def test_data_table_read_and_write(kernels):
    img, _ = kernels
    table = [3, 1, 4, 1, 5, 9, 2, 6]
    assert [img.function("table_at", I, [I])(i) for i in range(8)] == table
    # .data is writable: the module-scoped image keeps the value between calls
    before = img.function("table_at", I, [I])(5)
    assert img.function("table_bump", I, [I, I])(5, 10) == before + 10


def test_bss_is_zero_and_writable(kernels):
    img, _ = kernels
    add = img.function("bss_add", F, [I, F])
    assert add(200, 0.0) == 0.0
    assert add(201, 1.5) == 1.5
    assert add(201, 2.25) == 3.75


def test_global_through_got(kernels):
    img, types = kernels
    add = img.function("counter_add", I, [I])
    start = add(0)
    assert add(5) == start + 5
    # the same variable read through the pointer table (R_X86_64_64 in .data.rel.ro)
    assert img.function("deref", I, [I])(2) == start + 5
    assert types & {"R_X86_64_GOTPCREL", "R_X86_64_GOTPCRELX", "R_X86_64_REX_GOTPCRELX"}


def test_pointer_table_abs64(kernels):
    img, types = kernels
    deref = img.function("deref", I, [I])
    assert (deref(0), deref(1)) == (100, 200)
    assert "R_X86_64_64" in types


def test_calls_and_libm(kernels):
    img, _ = kernels
    assert img.function("caller", I, [I])(6) == (6 * 7 + 2) + (7 * 7 + 2)
    for x in (-3.0, 0.5, 10.25):
        expected = np.float32(2.0 ** x) * np.float32(2.0)  # exp2 is exact for these, so libm agrees bit for bit
        assert img.function("call_exp2f", F, [F])(x) == pytest.approx(float(expected), rel=2e-7)
    assert img.function("call_log2", D, [D])(1024.0) == 11.0
    assert img.function("call_log2", D, [D])(3.0) == pytest.approx(math.log2(3.0) + 1.0, rel=1e-15)


def test_buffer_kernel(kernels):
    img, _ = kernels
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal(1000).astype(np.float32), rng.standard_normal(1000).astype(np.float32)
    out = np.zeros_like(a)
    fp = ctypes.POINTER(ctypes.c_float)
    img.function("saxpy", None, [fp, fp, fp, F, I])(out.ctypes.data_as(fp), a.ctypes.data_as(fp),
                                                    b.ctypes.data_as(fp), 0.5, 1000)
    np.testing.assert_allclose(out, np.float32(0.5) * a + b, rtol=1e-6)


@pytest.mark.parametrize("variant, expected", [("default", {"R_X86_64_REX_GOTPCRELX", "R_X86_64_PLT32"}),
                                               ("no-plt", {"R_X86_64_GOTPCRELX"}),
                                               ("no-relax", {"R_X86_64_GOTPCREL"})])
def test_variants_cover_relocation_types(variant, expected):
    """The fixture variants really produce the GOT relocation flavours that the execution tests rely on."""
    cc = "gcc" if variant == "no-relax" else "clang"
    if shutil.which(cc) is None:
        pytest.skip(f"{cc} not installed")
    assert expected <= reloc_types(compile_c(cc, SOURCES / "kernels.c", *VARIANTS[variant]))


def _rel32_target(image: bytes, base: int, off: int) -> int:
    """Target of a 4-byte PC-relative field at image offset ``off`` whose instruction ends right after it."""
    return base + off + 4 + struct.unpack_from("<i", image, off)[0]


@pytest.mark.parametrize("cc", COMPILERS)
def test_external_call_direct_or_through_stub(cc):
    obj = compile_c(cc, SOURCES / "kernels.c")
    robj = RelocatableObject(obj)
    call_off = _plt32_offset(obj, "exp2f")
    base = 0x10000000
    near = robj.link(base, {"exp2f": base + 0x100000, "log2": 0x7000}.get)
    text = near.sections[".text"]
    assert _rel32_target(near.image, base, text + call_off) == base + 0x100000
    far_addr = 0x7F12_3456_7890
    far = robj.link(base, {"exp2f": far_addr, "log2": 0x7000}.get)
    stub = _rel32_target(far.image, base, text + call_off) - base
    assert far.image[stub:stub + 6] == b"\xff\x25\x00\x00\x00\x00"  # jmp *0(%rip)
    assert struct.unpack_from("<Q", far.image, stub + 6)[0] == far_addr
    assert any(s.executable and s.offset <= stub < s.offset + s.size for s in far.segments)


def _text_relocations(obj: bytes) -> list[tuple[int, str]]:
    sec = ELFFile(io.BytesIO(obj)).get_section_by_name(".rela.text")
    assert isinstance(sec, RelocationSection)
    return [(r["r_offset"], _type_name("EM_X86_64", r["r_info_type"])) for r in sec.iter_relocations()]


def _plt32_offset(obj: bytes, name: str) -> int:
    elf = ELFFile(io.BytesIO(obj))
    symtab = elf.get_section_by_name(".symtab")
    for sec in elf.iter_sections():
        if isinstance(sec, RelocationSection) and sec.name == ".rela.text":
            for r in sec.iter_relocations():
                if r["r_info_type"] == 4 and symtab.get_symbol(r["r_info_sym"]).name == name:
                    return r["r_offset"]
    raise LookupError(name)


@pytest.mark.skipif(shutil.which("clang") is None, reason="clang not installed")
def test_absolute_32_bit_relocations_and_overflow():
    obj = run_cc("clang", "--target=x86_64-none-elf", "-O2", "-fno-pic", "-mcmodel=small", "-c", "-x", "c",
                 str(SOURCES / "nonpic.c"), "-o")
    assert {"R_X86_64_32", "R_X86_64_32S"} <= reloc_types(obj)
    base = 0x40_0000
    linked = RelocatableObject(obj).link(base, lambda n: None)
    table = base + linked.symbols["table"]
    fields = {name: off for off, name in _text_relocations(obj)}
    text = linked.sections[".text"]
    assert struct.unpack_from("<I", linked.image, text + fields["R_X86_64_32"])[0] == table
    assert struct.unpack_from("<i", linked.image, text + fields["R_X86_64_32S"])[0] == table
    assert struct.unpack_from("<4i", linked.image, table - base) == (10, 20, 30, 40)
    with pytest.raises(CompileError, match=r"R_X86_64_32S? against table overflows"):
        RelocatableObject(obj).link(0x1_0000_0000, lambda n: None)


@pytest.mark.skipif(shutil.which("clang") is None, reason="clang not installed")
def test_pc64_and_abs64_against_external():
    obj = run_cc("clang", "--target=x86_64-none-elf", "-c", "-x", "assembler", str(SOURCES / "x86_pc64.s"), "-o")
    base, ext = 0x7F00_0000_0000, 0x1234_5678_9000
    linked = RelocatableObject(obj).link(base, {"ext_data": ext}.get)
    rel64 = linked.symbols["rel64"]
    pc64, abs64, pc64_ext = struct.unpack_from("<qQq", linked.image, rel64)
    assert base + rel64 + pc64 == base + linked.symbols["target"]
    assert abs64 == ext + 16
    assert base + rel64 + 16 + pc64_ext == ext


@pytest.mark.skipif(shutil.which("gcc") is None, reason="gcc not installed")
def test_common_symbols_get_zeroed_writable_storage(tmp_path):
    src = tmp_path / "common.c"
    src.write_text("int common_var;\nint bump(int d) { common_var += d; return common_var; }\n")
    obj = compile_c("gcc", src, "-fcommon")
    elf = ELFFile(io.BytesIO(obj))
    assert elf.get_section_by_name(".symtab").get_symbol_by_name("common_var")[0]["st_shndx"] == "SHN_COMMON"
    img = ExecutableImage.load(obj)
    bump = img.function("bump", I, [I])
    assert (bump(4), bump(5)) == (4, 9)
