"""AArch64: cross-compiled objects linked at a chosen base and checked without executing.

For every relocation of the object, the patched instruction (or data word) is decoded here with the bit layouts of
the Arm ARM (ADRP/ADR, ADD/LDR/STR unsigned immediate, B/BL, B.cond, TBZ, LDR literal) and the address it designates
is compared with S + A computed from the object's symbol table and the section placement. Bits outside each
immediate field must be unchanged.
"""

from __future__ import annotations

import io
import shutil
import struct
import subprocess
import tempfile
from pathlib import Path

import pytest
from elftools.elf.elffile import ELFFile
from elftools.elf.relocation import RelocationSection

from runtime_backends.cpu.elf import LinkedImage, RelocatableObject, _type_name
from runtime_core.compiler import CompileError

SOURCES = Path(__file__).parent / "elf_sources"
pytestmark = pytest.mark.skipif(shutil.which("clang") is None, reason="clang (cross-compiler) not installed")
C_FLAGS = ("-O2", "-fPIC", "-ffreestanding", "-fno-math-errno", "-nostdlib", "-fno-stack-protector",
           "-fno-asynchronous-unwind-tables", "-ffixed-x18")
BASE = 0x4000_0000
FAR = 1 << 40  # beyond the +-128 MiB reach of B/BL: needs a veneer
EXTERNALS = {"exp2f": FAR + 0x1230, "log2": BASE + 0x10_0000, "ext_func": FAR + 0x4560, "ext_data": 0x5000_1238}
FIELD_MASKS = {"ADRP": (3 << 29) | (0x7FFFF << 5), "IMM12": 0xFFF << 10, "IMM26": 0x3FFFFFF, "IMM19": 0x7FFFF << 5,
               "IMM14": 0x3FFF << 5}


def cross_compile(path: Path) -> bytes:
    lang = ("-x", "c", *C_FLAGS) if path.suffix == ".c" else ("-x", "assembler")
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run(["clang", "--target=aarch64-none-elf", "-c", *lang, str(path), "-o", f"{tmp}/o.o"],
                       capture_output=True, check=True)
        return Path(f"{tmp}/o.o").read_bytes()


def sext(value: int, bits: int) -> int:
    return value - (1 << bits) if value & (1 << (bits - 1)) else value


def adrp_page(insn: int, place: int) -> int:
    imm = sext((((insn >> 5) & 0x7FFFF) << 2) | ((insn >> 29) & 3), 21)
    return (place & ~0xFFF) + (imm << 12)


def adr_target(insn: int, place: int) -> int:
    return place + sext((((insn >> 5) & 0x7FFFF) << 2) | ((insn >> 29) & 3), 21)


def imm12(insn: int) -> int:
    return (insn >> 10) & 0xFFF


def branch_target(insn: int, place: int) -> int:
    return place + 4 * sext(insn & 0x3FFFFFF, 26)


def veneer_target(image: bytes, offset: int) -> int:
    """The address a ``ldr x16, #8; br x16; .quad addr`` veneer at ``offset`` jumps to."""
    ldr, br = struct.unpack_from("<II", image, offset)
    assert ldr & 0xFF00001F == 0x58000010 and br == 0xD61F0200, "not an ldr x16 / br x16 veneer"
    return struct.unpack_from("<Q", image, offset + 4 * sext((ldr >> 5) & 0x7FFFF, 19))[0]


def relocations(obj: bytes):
    elf = ELFFile(io.BytesIO(obj))
    symtab = elf.get_section_by_name(".symtab")
    for sec in elf.iter_sections():
        if isinstance(sec, RelocationSection) and not sec.name.startswith(".rela.eh_frame"):
            target = elf.get_section(sec["sh_info"]).name
            for r in sec.iter_relocations():
                sym = symtab.get_symbol(r["r_info_sym"])
                yield target, r["r_offset"], _type_name("EM_AARCH64", r["r_info_type"]), sym, r["r_addend"]


def symbol_address(elf: ELFFile, linked: LinkedImage, sym, externals: dict[str, int]) -> int:
    if sym["st_shndx"] == "SHN_UNDEF":
        return externals[sym.name]
    return linked.base + linked.sections[elf.get_section(sym["st_shndx"]).name] + sym["st_value"]


def check_all(obj: bytes, linked: LinkedImage, externals: dict[str, int] = EXTERNALS) -> set[str]:
    """Check every relocation of ``obj`` in ``linked``; returns the relocation type names seen."""
    elf = ELFFile(io.BytesIO(obj))
    orig = {s.name: s.data() for s in elf.iter_sections()}
    img, seen, got_pages = linked.image, set(), {}
    for secname, r_off, kind, sym, addend in relocations(obj):
        seen.add(kind)
        off = linked.sections[secname] + r_off
        place, target = linked.base + off, symbol_address(elf, linked, sym, externals) + addend
        (insn,) = struct.unpack_from("<I", img, off)
        (before,) = struct.unpack_from("<I", orig[secname], r_off)
        field = {"ADR_PREL_PG_HI21": "ADRP", "ADR_PREL_PG_HI21_NC": "ADRP", "ADR_GOT_PAGE": "ADRP",
                 "ADR_PREL_LO21": "ADRP", "CALL26": "IMM26", "JUMP26": "IMM26", "CONDBR19": "IMM19",
                 "TSTBR14": "IMM14"}.get(kind.removeprefix("R_AARCH64_"), "IMM12")
        if kind.removeprefix("R_AARCH64_") not in ("ABS64", "ABS32", "PREL64", "PREL32"):  # instructions
            assert insn & ~FIELD_MASKS[field] == before & ~FIELD_MASKS[field], f"{kind}: opcode bits changed"
        match kind.removeprefix("R_AARCH64_"):
            case "ADR_PREL_PG_HI21" | "ADR_PREL_PG_HI21_NC":
                assert adrp_page(insn, place) == target & ~0xFFF, kind
            case "ADR_PREL_LO21":
                assert adr_target(insn, place) == target
            case "ADD_ABS_LO12_NC":
                assert imm12(insn) == target & 0xFFF
            case "LDST8_ABS_LO12_NC" | "LDST16_ABS_LO12_NC" | "LDST32_ABS_LO12_NC" | "LDST64_ABS_LO12_NC" \
                    | "LDST128_ABS_LO12_NC" as name:
                size = {"8": 1, "16": 2, "32": 4, "64": 8, "128": 16}[name[4:].split("_")[0]]
                assert imm12(insn) * size == target & 0xFFF, kind
            case "CALL26" | "JUMP26":
                dest = branch_target(insn, place)
                if abs(target - place) >= 1 << 27:
                    assert veneer_target(img, dest - linked.base) == target, kind
                else:
                    assert dest == target, kind
            case "CONDBR19" | "TSTBR14":
                bits = 19 if kind.endswith("19") else 14
                assert place + 4 * sext((insn >> 5) & ((1 << bits) - 1), bits) == target
            case "ADR_GOT_PAGE":
                got_pages[sym.name] = adrp_page(insn, place)
            case "LD64_GOT_LO12_NC":
                slot = got_pages[sym.name] + imm12(insn) * 8
                assert struct.unpack_from("<Q", img, slot - linked.base)[0] == target
            case "ABS64":
                assert struct.unpack_from("<Q", img, off)[0] == target
            case "ABS32":
                assert struct.unpack_from("<I", img, off)[0] == target
            case "PREL32":
                assert struct.unpack_from("<i", img, off)[0] == target - place
            case "PREL64":
                assert struct.unpack_from("<q", img, off)[0] == target - place
            case _:
                raise AssertionError(f"test does not know {kind}")
    return seen


def test_kernels_c_relocations():
    obj = cross_compile(SOURCES / "kernels.c")
    linked = RelocatableObject(obj, page_size=4096).link(BASE, EXTERNALS.get)
    seen = check_all(obj, linked)
    assert {"R_AARCH64_ADR_PREL_PG_HI21", "R_AARCH64_ADD_ABS_LO12_NC", "R_AARCH64_CALL26", "R_AARCH64_ABS64",
            "R_AARCH64_ADR_GOT_PAGE", "R_AARCH64_LD64_GOT_LO12_NC"} <= seen
    assert linked.machine == "aarch64"
    # the pointer table holds the absolute addresses of ptr_a/ptr_b: read the values they point at
    assert sorted(linked.symbols) == sorted(["jump", "poly_f", "poly_d", "table_at", "table_bump", "bss_add",
                                             "counter_add", "deref", "helper", "caller", "call_exp2f", "call_log2",
                                             "saxpy", "global_counter"])


def test_extra_relocations_and_veneer():
    obj = cross_compile(SOURCES / "a64_extra.s")
    linked = RelocatableObject(obj, page_size=4096).link(BASE, EXTERNALS.get)
    seen = check_all(obj, linked)
    assert {"R_AARCH64_CONDBR19", "R_AARCH64_TSTBR14", "R_AARCH64_ADR_PREL_LO21", "R_AARCH64_ADR_PREL_PG_HI21_NC",
            "R_AARCH64_LDST8_ABS_LO12_NC", "R_AARCH64_LDST16_ABS_LO12_NC", "R_AARCH64_LDST128_ABS_LO12_NC",
            "R_AARCH64_JUMP26", "R_AARCH64_PREL32", "R_AARCH64_ABS32", "R_AARCH64_PREL64"} <= seen


def test_near_external_call_is_direct():
    obj = cross_compile(SOURCES / "a64_extra.s")
    near = {**EXTERNALS, "ext_func": BASE + 0x20_0000}
    linked = RelocatableObject(obj, page_size=4096).link(BASE, near.get)
    (insn,) = struct.unpack_from("<I", linked.image, linked.sections[".text"] + 0x24)  # the `b ext_func`
    assert branch_target(insn, BASE + linked.sections[".text"] + 0x24) == BASE + 0x20_0000


def test_adrp_overflow_names_relocation():
    obj = cross_compile(SOURCES / "a64_far.s")
    near = {"ext_data": BASE + 0x1000_0000}
    ok = RelocatableObject(obj, page_size=4096).link(BASE, near.get)
    assert check_all(obj, ok, near) == {"R_AARCH64_ADR_PREL_PG_HI21", "R_AARCH64_ADD_ABS_LO12_NC"}
    with pytest.raises(CompileError, match=r"R_AARCH64_ADR_PREL_PG_HI21 against ext_data overflows"):
        RelocatableObject(obj, page_size=4096).link(BASE, {"ext_data": FAR}.get)


def test_misaligned_base_is_rejected():
    robj = RelocatableObject(cross_compile(SOURCES / "kernels.c"), page_size=4096)
    with pytest.raises(ValueError, match="multiple of 0x1000"):
        robj.link(BASE + 8, EXTERNALS.get)
