"""In-process static linker for one ELF64 relocatable object (x86-64 and AArch64).

The compiler driver produces a relocatable object (``ET_REL``); this module turns it into one position-fixed image
that can be copied into executable memory and called. Parsing (headers, sections, symbols, relocation entries) is
done by pyelftools; layout, GOT, call stubs and relocation arithmetic are done here.

Linking is two-phase because the image must be linked for the address where it will live:

    obj = RelocatableObject(data)            # parse + lay out; obj.size is the number of bytes to map
    base = <map obj.size bytes, aligned to obj.alignment>
    linked = obj.link(base, resolve)         # LinkedImage: bytes to copy to ``base``, symbol offsets, segments

Image layout (each non-empty region starts on a page boundary so that it can get its own protection):

    text   : SHF_EXECINSTR sections, then call stubs           -> read + execute
    rodata : other read-only SHF_ALLOC sections (.rodata*, constant pools, jump tables),
             .data.rel.ro* (read-only once relocated), then the GOT                     -> read only
    data   : writable sections (.data*), SHT_NOBITS (.bss*, zero filled), SHN_COMMON symbols  -> read + write

Relocation formulas follow the System V x86-64 psABI (section 4.4, "Relocation Types") and the Arm ELF for the
64-bit architecture (AAELF64, section 5.7 "Relocation"). Notation: S symbol address, A addend, P address of the
place, G address of the symbol's GOT entry, L address of the symbol's call stub, Page(x) = x & ~0xfff.

GOT-relative relocations (GOTPCREL, GOTPCRELX, REX_GOTPCRELX, ADR_GOT_PAGE, LD64_GOT_LO12_NC) always use a real GOT
entry holding the absolute symbol address (no relaxation). Calls (PLT32, CALL26, JUMP26) to an external symbol go
straight to it when it is within the branch range and through a stub otherwise (x86-64: ``jmp *0(%rip)`` followed by
the 8-byte address; AArch64: ``ldr x16, #8; br x16`` followed by the 8-byte address; x16 is IP0, the register the
AAPCS64 reserves for such veneers).

Every failure (a malformed or foreign object, an unsupported section or relocation, an unresolved symbol, a field
overflow) raises ``runtime_core.compiler.CompileError`` with a message that names the object element at fault.
"""

from __future__ import annotations

import io
import mmap
import struct
from collections.abc import Callable
from dataclasses import dataclass

from elftools.common.exceptions import ELFError
from elftools.elf.elffile import ELFFile
from elftools.elf.enums import ENUM_RELOC_TYPE_AARCH64, ENUM_RELOC_TYPE_x64
from elftools.elf.relocation import RelocationSection
from elftools.elf.sections import SymbolTableSection

from runtime_core.compiler import CompileError

__all__ = ["LinkedImage", "RelocatableObject", "Resolver", "Segment", "image_size", "link"]

Resolver = Callable[[str], "int | None"]
"""Maps an undefined symbol name to its absolute address, or None when it is unknown."""

MAX_IMAGE_BYTES = 1 << 30
"""Largest linked image the loader builds (kernel objects are a few KiB; a larger one is corrupt or hostile)."""
_STUB_SIZE = 16
_GOT_ENTRY = 8
_U64 = (1 << 64) - 1

# Relocation type numbers handled here (psABI / AAELF64). pyelftools' enums lack some of them
# (R_X86_64_GOTPCRELX = 41, R_AARCH64_LDST128_ABS_LO12_NC = 299), so they are spelled out.
_X86 = {"R_X86_64_NONE": 0, "R_X86_64_64": 1, "R_X86_64_PC32": 2, "R_X86_64_PLT32": 4, "R_X86_64_GOTPCREL": 9,
        "R_X86_64_32": 10, "R_X86_64_32S": 11, "R_X86_64_PC64": 24, "R_X86_64_GOTPCRELX": 41,
        "R_X86_64_REX_GOTPCRELX": 42}
_A64 = {"R_AARCH64_NONE": 0, "R_AARCH64_NONE_OLD": 256, "R_AARCH64_ABS64": 257, "R_AARCH64_ABS32": 258,
        "R_AARCH64_PREL64": 260, "R_AARCH64_PREL32": 261, "R_AARCH64_ADR_PREL_LO21": 274,
        "R_AARCH64_ADR_PREL_PG_HI21": 275, "R_AARCH64_ADR_PREL_PG_HI21_NC": 276, "R_AARCH64_ADD_ABS_LO12_NC": 277,
        "R_AARCH64_LDST8_ABS_LO12_NC": 278, "R_AARCH64_TSTBR14": 279, "R_AARCH64_CONDBR19": 280,
        "R_AARCH64_JUMP26": 282, "R_AARCH64_CALL26": 283, "R_AARCH64_LDST16_ABS_LO12_NC": 284,
        "R_AARCH64_LDST32_ABS_LO12_NC": 285, "R_AARCH64_LDST64_ABS_LO12_NC": 286,
        "R_AARCH64_LDST128_ABS_LO12_NC": 299, "R_AARCH64_ADR_GOT_PAGE": 311, "R_AARCH64_LD64_GOT_LO12_NC": 312}
_GOT_TYPES = {"EM_X86_64": {9, 41, 42}, "EM_AARCH64": {311, 312}}
_CALL_TYPES = {"EM_X86_64": {4}, "EM_AARCH64": {282, 283}}
_NONE_TYPES = {"EM_X86_64": {0}, "EM_AARCH64": {0, 256}}
_WIDE_TYPES = {1, 24, 257, 260}  # 64-bit fields: R_X86_64_64, R_X86_64_PC64, R_AARCH64_ABS64, R_AARCH64_PREL64
_MACHINES = {"EM_X86_64": "x86_64", "EM_AARCH64": "aarch64"}


def _type_name(machine: str, rtype: int) -> str:
    """Name of relocation type ``rtype`` for ``machine`` (our table first, then pyelftools', else the number)."""
    ours = _X86 if machine == "EM_X86_64" else _A64
    theirs = ENUM_RELOC_TYPE_x64 if machine == "EM_X86_64" else ENUM_RELOC_TYPE_AARCH64
    for table in (ours, theirs):
        for name, number in table.items():
            if number == rtype and not name.startswith("_"):
                return name
    return f"unknown relocation type {rtype}"


def _symbol_name(elf: ELFFile, sym) -> str:
    """The symbol's name; section symbols (which have none) are named after their section."""
    if sym["st_info"]["type"] == "STT_SECTION" and isinstance(sym["st_shndx"], int):
        return elf.get_section(sym["st_shndx"]).name
    return sym.name


@dataclass(frozen=True)
class Segment:
    """A page-aligned byte range of the image that gets one protection: offset and size in bytes."""

    offset: int
    size: int
    writable: bool
    executable: bool


@dataclass(frozen=True)
class LinkedImage:
    """An object linked for address ``base``.

    image: the bytes to place at ``base`` (length == the object's ``size``; .bss already zero-filled).
    symbols: global/weak defined symbol name -> byte offset in ``image``.
    sections: placed section name -> byte offset in ``image`` (for diagnostics and tests).
    segments: the regions and the protection each must get after copying.
    machine: "x86_64" or "aarch64".
    """

    image: bytes
    base: int
    symbols: dict[str, int]
    sections: dict[str, int]
    segments: tuple[Segment, ...]
    machine: str

    @property
    def size(self) -> int:
        """Length of ``image`` in bytes."""
        return len(self.image)


@dataclass(frozen=True)
class _Section:
    index: int
    name: str
    data: bytes | None  # None for SHT_NOBITS
    size: int
    align: int
    region: int  # 0 text, 1 rodata, 2 data


@dataclass(frozen=True)
class _Symbol:
    name: str
    shndx: int | str
    value: int
    size: int
    bind: str
    kind: str


@dataclass(frozen=True)
class _Reloc:
    section: int  # index of the section being patched
    offset: int
    rtype: int
    sym: int
    addend: int


def _align(x: int, a: int) -> int:
    return (x + a - 1) // a * a if a > 1 else x


def _region_of(name: str, flags: int) -> int:
    if flags & 0x4:  # SHF_EXECINSTR
        return 0
    if not flags & 0x1 or name.startswith(".data.rel.ro"):  # SHF_WRITE; relro is read-only once relocated
        return 1
    return 2


class RelocatableObject:
    """A parsed and laid-out ELF64 little-endian relocatable object (x86-64 or AArch64).

    Args:
        obj: the object file bytes, as written by ``cc -c``.
        page_size: alignment of each region in bytes (default: this host's page size).

    Attributes:
        size: bytes needed for the linked image (a multiple of ``page_size``; at least one page).
        alignment: the alignment ``base`` must have (``page_size`` or a larger section alignment).
        machine: "x86_64" or "aarch64".

    Raises:
        CompileError: not an ELF64 LE ET_REL object, an unsupported machine, thread-local storage, init/fini
            arrays, REL (implicit addend) relocations for loaded sections, a section aligned beyond ``page_size``,
            an image larger than ``MAX_IMAGE_BYTES``, or a malformed file (e.g. section data beyond its end).
        TypeError: ``obj`` is not bytes-like.
    """

    def __init__(self, obj: bytes, page_size: int = mmap.PAGESIZE):
        if page_size <= 0 or page_size & (page_size - 1):
            raise ValueError(f"page_size must be a positive power of two, got {page_size}")
        self.page_size = page_size
        if not isinstance(obj, (bytes, bytearray, memoryview)):
            raise TypeError(f"the object must be bytes (what the compiler returned), got {type(obj).__name__}")
        try:
            self._parse(bytes(obj))
        except (ELFError, OverflowError, struct.error) as e:  # offsets/sizes beyond the file or beyond 64 bits
            raise CompileError(f"cannot parse the object file ({len(obj)} bytes): {e}") from e
        self._layout()

    # ---- parsing -------------------------------------------------------------------------------------------------
    def _parse(self, obj: bytes) -> None:
        elf = ELFFile(io.BytesIO(obj))
        if elf.elfclass != 64 or not elf.little_endian or elf["e_type"] != "ET_REL":
            raise CompileError(f"expected an ELF64 little-endian relocatable object, got ELF{elf.elfclass} "
                               f"{'LE' if elf.little_endian else 'BE'} {elf['e_type']}")
        self._em = elf["e_machine"]
        if self._em not in _MACHINES:
            raise CompileError(f"unsupported ELF machine {self._em}: the CPU loader links x86-64 and AArch64 only")
        self.machine = _MACHINES[self._em]
        self._sections: list[_Section] = []
        self._symbols: list[_Symbol] = []
        self._relocs: list[_Reloc] = []
        rel_sections = []
        for index, sec in enumerate(elf.iter_sections()):
            h = sec.header
            if isinstance(sec, SymbolTableSection) and h["sh_type"] == "SHT_SYMTAB":
                self._symbols = [_Symbol(_symbol_name(elf, s), s["st_shndx"], s["st_value"], s["st_size"],
                                         s["st_info"]["bind"], s["st_info"]["type"]) for s in sec.iter_symbols()]
            elif isinstance(sec, RelocationSection):
                rel_sections.append(sec)
            elif h["sh_flags"] & 0x2 and sec.name != ".eh_frame":  # SHF_ALLOC; unwind tables are not needed
                self._add_section(index, sec)
        placed = {s.index for s in self._sections}
        for sec in rel_sections:
            if sec.header["sh_info"] not in placed:
                continue  # relocations for debug info, .eh_frame, ...: not loaded
            if not sec.is_RELA():
                raise CompileError(f"relocation section {sec.name} is SHT_REL (implicit addends); only SHT_RELA "
                                   f"objects are supported")
            self._relocs += [_Reloc(sec.header["sh_info"], r["r_offset"], r["r_info_type"], r["r_info_sym"],
                                    r["r_addend"]) for r in sec.iter_relocations()]
        self._check_places()

    def _check_places(self) -> None:
        by_index = {s.index: s for s in self._sections}
        for r in self._relocs:
            sec = by_index[r.section]
            width = 8 if r.rtype in _WIDE_TYPES else 4
            if sec.data is None or r.offset + width > sec.size:
                raise CompileError(f"relocation {_type_name(self._em, r.rtype)} at offset {r.offset:#x} does not fit "
                                   f"in section {sec.name} ({sec.size} bytes{', SHT_NOBITS' if sec.data is None else ''})")

    def _add_section(self, index: int, sec) -> None:
        h = sec.header
        if h["sh_flags"] & 0x400:  # SHF_TLS
            raise CompileError(f"section {sec.name} holds thread-local storage, which the CPU loader does not support")
        if h["sh_type"] in ("SHT_INIT_ARRAY", "SHT_FINI_ARRAY", "SHT_PREINIT_ARRAY"):
            raise CompileError(f"section {sec.name} ({h['sh_type']}) needs constructors/destructors to run, which "
                               f"the CPU loader does not do")
        nobits = h["sh_type"] == "SHT_NOBITS"
        region = 2 if nobits else _region_of(sec.name, h["sh_flags"])
        data = None if nobits else sec.data()
        if data is not None and len(data) != h["sh_size"]:
            raise CompileError(f"section {sec.name} claims {h['sh_size']} bytes at file offset {h['sh_offset']}, but "
                               f"the file holds only {len(data)} of them (truncated or corrupt object)")
        if h["sh_addralign"] > self.page_size:
            raise CompileError(f"section {sec.name} asks for {h['sh_addralign']}-byte alignment; the loader aligns "
                               f"sections to at most a page ({self.page_size} bytes)")
        self._sections.append(_Section(index, sec.name, data, h["sh_size"], max(1, h["sh_addralign"]), region))

    # ---- layout --------------------------------------------------------------------------------------------------
    def _layout(self) -> None:
        by_index = {s.index: s for s in self._sections}
        got_keys, stub_syms = [], []
        for r in self._relocs:
            if r.rtype in _GOT_TYPES[self._em] and self._got_key(r) not in got_keys:
                got_keys.append(self._got_key(r))
            sym = self._symbols[r.sym] if r.sym < len(self._symbols) else None
            if r.rtype in _CALL_TYPES[self._em] and sym is not None and sym.shndx == "SHN_UNDEF" \
                    and r.sym not in stub_syms:
                stub_syms.append(r.sym)
        commons = [i for i, s in enumerate(self._symbols) if s.shndx == "SHN_COMMON"]

        # items per region: (kind, key, size, align); kinds: "sec", "stubs", "got", "common"
        items: list[list[tuple[str, int, int, int]]] = [[], [], []]
        for s in self._sections:
            items[s.region].append(("sec", s.index, s.size, s.align))
        items[0].append(("stubs", 0, _STUB_SIZE * len(stub_syms), 16))
        items[1].append(("got", 0, _GOT_ENTRY * len(got_keys), 8))
        items[2] += [("common", i, self._symbols[i].size, max(1, self._symbols[i].value)) for i in commons]

        offsets: dict[tuple[str, int], int] = {}
        segments, pos = [], 0
        for region, region_items in enumerate(items):
            start = pos = _align(pos, self.page_size)
            for kind, key, size, align in region_items:
                pos = _align(pos, align)
                offsets[(kind, key)] = pos
                pos += size
            if pos > start:
                segments.append(Segment(start, _align(pos, self.page_size) - start, region == 2, region == 0))
        self.size = max(self.page_size, _align(pos, self.page_size))
        if self.size > MAX_IMAGE_BYTES:
            raise CompileError(f"the linked image would need {self.size} bytes, more than the loader's limit of "
                               f"{MAX_IMAGE_BYTES} (corrupt section sizes?)")
        self.alignment = max([self.page_size] + [s.align for s in by_index.values()])
        self._offsets = offsets
        self._got_slots = {k: offsets[("got", 0)] + _GOT_ENTRY * i for i, k in enumerate(got_keys)}
        self._stub_slots = {k: offsets[("stubs", 0)] + _STUB_SIZE * i for i, k in enumerate(stub_syms)}
        self._segments = tuple(segments)
        self._by_index = by_index

    def _got_key(self, r: _Reloc) -> tuple[int, int]:
        # x86-64 GOTPCREL's addend adjusts for the place (G + A - P); AArch64's GOT entry holds S + A (GDAT(S+A)).
        return (r.sym, 0) if self._em == "EM_X86_64" else (r.sym, r.addend)

    # ---- linking -------------------------------------------------------------------------------------------------
    def link(self, base: int, resolve: Resolver) -> LinkedImage:
        """Produce the image for address ``base``.

        Args:
            base: absolute address the image will be copied to; must be a multiple of ``alignment``.
            resolve: called once per referenced undefined symbol name; returns its address or None.

        Raises:
            ValueError: ``base`` is negative or misaligned.
            CompileError: an undefined non-weak symbol that ``resolve`` does not know (all such names are listed),
                a relocation type this loader does not handle (type name and symbol named), a relocation result
                that does not fit its field (type, symbol and value named).
        """
        if base < 0 or base % self.alignment or base + self.size > _U64:
            raise ValueError(f"base address {base:#x} must be a non-negative multiple of {self.alignment:#x} "
                             f"with room for {self.size} bytes")
        addresses = self._symbol_addresses(base, resolve)
        buf = bytearray(self.size)
        for s in self._sections:
            if s.data is not None:
                off = self._offsets[("sec", s.index)]
                buf[off:off + s.size] = s.data
        for (sym, addend), off in self._got_slots.items():
            struct.pack_into("<Q", buf, off, (addresses[sym] + addend) & _U64)
        for sym, off in self._stub_slots.items():
            buf[off:off + _STUB_SIZE] = _stub(self._em, addresses[sym])
        apply = _apply_x86_64 if self._em == "EM_X86_64" else _apply_aarch64
        for r in self._relocs:
            if r.rtype in _NONE_TYPES[self._em]:
                continue
            off = self._offsets[("sec", r.section)] + r.offset
            got = self._got_slots.get(self._got_key(r))
            stub = self._stub_slots.get(r.sym)
            fix = _Fixup(_type_name(self._em, r.rtype), self._symbols[r.sym].name or f"symbol #{r.sym}", off,
                         base + off, addresses[r.sym] + r.addend, r.addend,
                         None if got is None else base + got, None if stub is None else base + stub)
            apply(buf, r.rtype, fix)
        symbols = {s.name: addresses[i] - base for i, s in enumerate(self._symbols) if s.name and i in addresses
                   and s.bind in ("STB_GLOBAL", "STB_WEAK") and s.shndx not in ("SHN_UNDEF", "SHN_ABS")}
        sections = {s.name: self._offsets[("sec", s.index)] for s in self._sections}
        return LinkedImage(bytes(buf), base, symbols, sections, self._segments, self.machine)

    def _symbol_addresses(self, base: int, resolve: Resolver) -> dict[int, int]:
        """Absolute address of every symbol that a relocation references or that is defined in a loaded section."""
        referenced = {r.sym for r in self._relocs if r.rtype not in _NONE_TYPES[self._em]}
        if referenced and max(referenced) >= len(self._symbols):
            raise CompileError(f"a relocation refers to symbol index {max(referenced)}, but the symbol table has "
                               f"{len(self._symbols)} entries")
        addresses: dict[int, int] = {0: 0}
        missing: list[str] = []
        for i, s in enumerate(self._symbols[1:], start=1):
            if s.shndx == "SHN_UNDEF" and i in referenced:
                addr = resolve(s.name)
                if addr is None and s.bind != "STB_WEAK":  # an unresolved weak reference is 0 (ELF gABI)
                    missing.append(s.name)
                addresses[i] = 0 if addr is None else addr
            elif s.shndx == "SHN_ABS":
                addresses[i] = s.value
            elif s.shndx == "SHN_COMMON":
                addresses[i] = base + self._offsets[("common", i)]
            elif isinstance(s.shndx, int) and s.shndx in self._by_index:
                addresses[i] = base + self._offsets[("sec", s.shndx)] + s.value
            elif i in referenced:
                raise CompileError(f"a relocation refers to symbol {s.name or f'#{i}'}, defined in section index "
                                   f"{s.shndx}, which is not loaded (not SHF_ALLOC, or unwind information)")
        if missing:
            raise CompileError(f"undefined symbol(s) not known to the resolver: {', '.join(sorted(set(missing)))}; "
                               f"the code references something that is neither in the object nor in the loader's "
                               f"whitelist of host functions")
        return addresses


def image_size(obj: bytes, page_size: int = mmap.PAGESIZE) -> int:
    """Bytes of memory (a multiple of ``page_size``) the linked image of ``obj`` needs. Raises CompileError."""
    return RelocatableObject(obj, page_size).size


def link(obj: bytes, base: int, resolve: Resolver, page_size: int = mmap.PAGESIZE) -> LinkedImage:
    """Parse, lay out and link ``obj`` for address ``base`` (see ``RelocatableObject.link``)."""
    return RelocatableObject(obj, page_size).link(base, resolve)


def _stub(em: str, target: int) -> bytes:
    if em == "EM_X86_64":  # jmp *0(%rip); .quad target; int3 int3
        return b"\xff\x25\x00\x00\x00\x00" + struct.pack("<Q", target) + b"\xcc\xcc"
    return struct.pack("<IIQ", 0x58000050, 0xD61F0200, target)  # ldr x16, #8; br x16; .quad target


@dataclass(frozen=True)
class _Fixup:
    rname: str
    symbol: str
    offset: int  # in the image buffer
    place: int  # P
    target: int  # S + A
    addend: int  # A
    got: int | None  # G
    stub: int | None  # L


def _check(fix: _Fixup, value: int, lo: int, hi: int) -> int:
    if not lo <= value < hi:
        raise CompileError(f"relocation {fix.rname} against {fix.symbol} overflows: value {value:#x} is outside "
                           f"[{lo:#x}, {hi:#x}) (place {fix.place:#x}, target {fix.target:#x}); the image and the "
                           f"symbol are too far apart for this instruction")
    return value


def _unhandled(fix: _Fixup) -> CompileError:
    return CompileError(f"unsupported relocation type {fix.rname} against symbol {fix.symbol} at image offset "
                        f"{fix.offset:#x}")


def _apply_x86_64(buf: bytearray, rtype: int, fix: _Fixup) -> None:
    s32 = (-(1 << 31), 1 << 31)
    if rtype == 1:  # R_X86_64_64: S + A
        struct.pack_into("<Q", buf, fix.offset, fix.target & _U64)
    elif rtype in (2, 4):  # PC32: S + A - P; PLT32: L + A - P (direct when in range)
        value = fix.target - fix.place
        if rtype == 4 and not s32[0] <= value < s32[1] and fix.stub is not None:
            value = fix.stub + fix.addend - fix.place
        struct.pack_into("<i", buf, fix.offset, _check(fix, value, *s32))
    elif rtype in (9, 41, 42):  # GOTPCREL(X): G + A - P
        if fix.got is None:
            raise _unhandled(fix)
        struct.pack_into("<i", buf, fix.offset, _check(fix, fix.got + fix.addend - fix.place, *s32))
    elif rtype == 10:  # R_X86_64_32: S + A, zero-extended
        struct.pack_into("<I", buf, fix.offset, _check(fix, fix.target, 0, 1 << 32))
    elif rtype == 11:  # R_X86_64_32S: S + A, sign-extended
        struct.pack_into("<i", buf, fix.offset, _check(fix, fix.target, *s32))
    elif rtype == 24:  # R_X86_64_PC64: S + A - P
        struct.pack_into("<Q", buf, fix.offset, (fix.target - fix.place) & _U64)
    else:
        raise _unhandled(fix)


def _patch32(buf: bytearray, off: int, mask: int, bits: int) -> None:
    (insn,) = struct.unpack_from("<I", buf, off)
    struct.pack_into("<I", buf, off, (insn & ~mask & 0xFFFFFFFF) | (bits & mask))


def _adr_imm(buf: bytearray, off: int, imm21: int) -> None:
    """ADR/ADRP immediate: immlo in bits [30:29], immhi in bits [23:5]."""
    _patch32(buf, off, (3 << 29) | (0x7FFFF << 5), ((imm21 & 3) << 29) | (((imm21 >> 2) & 0x7FFFF) << 5))


def _lo12(buf: bytearray, fix: _Fixup, value: int, shift: int) -> None:
    """ADD/LDR/STR unsigned 12-bit immediate in bits [21:10], scaled by the access size 2**shift."""
    if value & ((1 << shift) - 1):
        raise CompileError(f"relocation {fix.rname} against {fix.symbol}: address {value:#x} is not aligned to the "
                           f"{1 << shift}-byte access that the instruction at place {fix.place:#x} scales by")
    _patch32(buf, fix.offset, 0xFFF << 10, ((value & 0xFFF) >> shift) << 10)


def _page(x: int) -> int:
    return x & ~0xFFF


_LDST_SHIFT = {278: 0, 284: 1, 285: 2, 286: 3, 299: 4}


def _apply_aarch64(buf: bytearray, rtype: int, fix: _Fixup) -> None:
    s, p = fix.target, fix.place
    if rtype == 257:  # ABS64: S + A
        struct.pack_into("<Q", buf, fix.offset, s & _U64)
    elif rtype in (258, 261):  # ABS32: S + A; PREL32: S + A - P; both -2^31 <= X < 2^32
        value = s if rtype == 258 else s - p
        struct.pack_into("<I", buf, fix.offset, _check(fix, value, -(1 << 31), 1 << 32) & 0xFFFFFFFF)
    elif rtype == 260:  # PREL64: S + A - P
        struct.pack_into("<Q", buf, fix.offset, (s - p) & _U64)
    elif rtype == 274:  # ADR_PREL_LO21: S + A - P
        _adr_imm(buf, fix.offset, _check(fix, s - p, -(1 << 20), 1 << 20))
    elif rtype in (275, 276):  # ADR_PREL_PG_HI21(_NC): Page(S + A) - Page(P), bits [32:12]
        value = _page(s) - _page(p)
        if rtype == 275:
            _check(fix, value, -(1 << 32), 1 << 32)
        _adr_imm(buf, fix.offset, value >> 12)
    elif rtype == 277:  # ADD_ABS_LO12_NC: (S + A) & 0xfff
        _lo12(buf, fix, s, 0)
    elif rtype in _LDST_SHIFT:  # LDSTn_ABS_LO12_NC: bits [11:shift] of S + A
        _lo12(buf, fix, s & 0xFFF, _LDST_SHIFT[rtype])
    elif rtype in (282, 283):  # JUMP26/CALL26: S + A - P, bits [27:2]; a veneer when out of range
        value = s - p
        if not -(1 << 27) <= value < 1 << 27 and fix.stub is not None and fix.addend == 0:
            value = fix.stub - p
        _patch32(buf, fix.offset, 0x3FFFFFF, _check(fix, value, -(1 << 27), 1 << 27) >> 2)
    elif rtype == 280:  # CONDBR19: S + A - P, bits [20:2] into [23:5]
        _patch32(buf, fix.offset, 0x7FFFF << 5, (_check(fix, s - p, -(1 << 20), 1 << 20) >> 2) << 5)
    elif rtype == 279:  # TSTBR14: S + A - P, bits [15:2] into [18:5]
        _patch32(buf, fix.offset, 0x3FFF << 5, (_check(fix, s - p, -(1 << 15), 1 << 15) >> 2) << 5)
    elif rtype == 311 and fix.got is not None:  # ADR_GOT_PAGE: Page(G(GDAT(S + A))) - Page(P)
        _adr_imm(buf, fix.offset, _check(fix, _page(fix.got) - _page(p), -(1 << 32), 1 << 32) >> 12)
    elif rtype == 312 and fix.got is not None:  # LD64_GOT_LO12_NC: G(GDAT(S + A)) bits [11:3]
        _lo12(buf, fix, fix.got & 0xFFF, 3)
    else:
        raise _unhandled(fix)
