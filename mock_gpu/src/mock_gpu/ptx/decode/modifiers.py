"""The dotted modifiers each opcode may carry (PTX ISA chapter 9 "Instruction Set", one syntax block per opcode).

The decoder rejects, at load time, any modifier of an instruction that is not listed here for its opcode (types,
comparison operators and the setp/set boolean operators are checked separately), so that a misspelt or unsupported
form such as ``st.global.frobnicate.f32`` is an error instead of being silently ignored. Modifiers that only steer
caching, memory ordering or scope are accepted and have no effect: the interpreter runs every access in program order
and sequentially consistent.
"""

from __future__ import annotations

__all__ = ["ALLOWED", "unknown_modifiers", "CACHE_HINT", "SPACES"]

CACHE_HINT = "L2::cache_hint"  # adds a trailing cache-policy operand (PTX ISA 9.7.9.8 ld, "cache-policy")

_ROUND = {"rn", "rz", "rm", "rp"}
_ROUND_INT = {"rni", "rzi", "rmi", "rpi"}
SPACES = {"global", "shared", "local", "const", "param", "shared::cta", "shared::cluster", "param::entry",
          "param::func"}
_SCOPE = {"cta", "cluster", "gpu", "sys"}
_ORDER = {"weak", "volatile", "relaxed", "acquire", "release", "acq_rel", "mmio"}
_EVICT = {f"{level}::{p}" for level in ("L1", "L2") for p in ("evict_normal", "evict_unchanged", "evict_first",
                                                              "evict_last", "no_allocate")}
_PREFETCH = {"L2::64B", "L2::128B", "L2::256B"}
_CACHE_OPS = {"ca", "cg", "cs", "lu", "cv", "wb", "wt", "nc"}
_VEC = {"v2", "v4", "v8"}
_MEMORY = SPACES | _SCOPE | _ORDER | _EVICT | _PREFETCH | _VEC | {CACHE_HINT}
_VIDEO = {f"{op}{n}" for op in ("vadd", "vsub", "vavrg", "vabsdiff", "vmin", "vmax", "vset") for n in "24"}
_VIDEO_CMPS = {"eq", "ne", "lt", "le", "gt", "ge"}
_ATOM_OPS = {"add", "min", "max", "inc", "dec", "and", "or", "xor", "exch", "cas"}

ALLOWED: dict[str, frozenset[str]] = {k: frozenset(v) for k, v in {
    # integer and floating-point arithmetic (PTX ISA 9.7.1-9.7.4)
    "add": _ROUND | {"ftz", "sat", "cc"}, "sub": _ROUND | {"ftz", "sat", "cc"}, "addc": {"cc"}, "subc": {"cc"},
    "mul": _ROUND | {"ftz", "sat", "lo", "hi", "wide"}, "mad": _ROUND | {"ftz", "sat", "lo", "hi", "wide", "cc"},
    "madc": {"lo", "hi", "cc"}, "mul24": {"lo", "hi"}, "mad24": {"lo", "hi", "sat"}, "sad": set(),
    "fma": _ROUND | {"ftz", "sat", "relu"}, "div": _ROUND | {"ftz", "approx", "full"}, "rem": set(),
    "abs": {"ftz"}, "neg": {"ftz"}, "min": {"ftz", "NaN", "relu"}, "max": {"ftz", "NaN", "relu"}, "copysign": set(),
    "sqrt": _ROUND | {"ftz", "approx"}, "rcp": _ROUND | {"ftz", "approx"}, "rsqrt": {"ftz", "approx"},
    "ex2": {"ftz", "approx"}, "lg2": {"ftz", "approx"}, "sin": {"ftz", "approx"}, "cos": {"ftz", "approx"},
    "tanh": {"approx"}, "testp": {"finite", "infinite", "number", "notanumber", "normal", "subnormal"},
    "dp4a": set(), "dp2a": {"lo", "hi"},
    **{op: {"sat", "add"} for op in _VIDEO if not op.startswith("vset")},
    **{op: {"add"} | _VIDEO_CMPS for op in _VIDEO if op.startswith("vset")},
    # comparison, selection, logic, shifts, bit fields, conversion (PTX ISA 9.7.6-9.7.9)
    "setp": {"ftz"}, "set": {"ftz"}, "selp": set(), "slct": {"ftz"},
    "and": set(), "or": set(), "xor": set(), "not": set(), "cnot": set(), "lop3": {"and", "or"},
    "shl": set(), "shr": set(), "shf": {"l", "r", "wrap", "clamp"}, "bmsk": {"wrap", "clamp"},
    "szext": {"wrap", "clamp"},
    "popc": set(), "clz": set(), "brev": set(), "bfind": {"shiftamt"}, "bfe": set(), "bfi": set(),
    "prmt": {"f4e", "b4e", "rc8", "ecl", "ecr", "rc16"},
    "cvt": _ROUND | _ROUND_INT | {"ftz", "sat", "relu", "satfinite"}, "mov": set(), "cvta": SPACES | {"to"},
    "isspacep": SPACES,
    # memory (PTX ISA 9.7.9.8-9.7.9.10, 9.7.9.25 cp.async, 9.7.13.5-9.7.13.6)
    "tex": {"1d", "2d", "3d", "a1d", "a2d", "cube", "acube", "v4"},  # PTX ISA 9.7.10.3
    "ld": _MEMORY | _CACHE_OPS, "ldu": {"global", "v2", "v4"}, "st": _MEMORY | _CACHE_OPS,
    "atom": _MEMORY | _ATOM_OPS | {"noftz"}, "red": _MEMORY | _ATOM_OPS | {"noftz"},
    "cp": {"async", "ca", "cg", "shared", "shared::cta", "global", CACHE_HINT, "commit_group", "wait_group",
           "wait_all", "bulk", "shared::cluster", "mbarrier::complete_tx::bytes", "mbarrier", "arrive",
           "noinc"} | _PREFETCH,
    # mbarrier (PTX ISA 9.7.13.15)
    "mbarrier": {"init", "inval", "arrive", "arrive_drop", "expect_tx", "complete_tx", "test_wait", "try_wait",
                 "parity", "pending_count", "noComplete", "shared", "shared::cta", "relaxed", "release", "acquire",
                 "cta", "cluster"},
    "prefetch": {"global", "local", "L1", "L2", "L2::evict_last", "L2::evict_normal"}, "prefetchu": {"L1"},
    "createpolicy": {"fractional", "range", "global"} | _EVICT, "discard": {"global", "L2"},
    "applypriority": {"global", "L2::evict_normal"},
    "membar": {"cta", "gl", "sys"},
    "fence": _SCOPE | SPACES | {"sc", "acq_rel", "acquire", "release", "proxy", "alias", "async", "generic"},
    # warp and block level (PTX ISA 9.7.8.x, 9.7.13)
    "shfl": {"sync", "up", "down", "bfly", "idx"}, "vote": {"sync", "all", "any", "uni", "ballot"},
    "activemask": set(), "redux": {"sync", "add", "min", "max", "and", "or", "xor"},
    "match": {"sync", "any", "all"},
    # mma (PTX ISA 9.7.14.5.14): every documented shape/layout/type word, so the decoder can name what it refuses
    "mma": {"sync", "aligned", "row", "col", "satfinite", "sp", "sp::ordered_metadata", "xor", "popc", "and",
            "tf32", "e4m3", "e5m2", "e3m2", "e2m3", "e2m1", "s4", "u4", "b1"}
    | {f"m{m}n{n}k{k}" for m, n, k in ((8, 8, 4), (16, 8, 4), (16, 8, 8), (16, 8, 16), (16, 8, 32), (16, 8, 64),
                                       (16, 8, 128), (16, 8, 256), (8, 8, 16), (8, 8, 32), (8, 8, 128))},
    "bar": {"sync", "arrive", "red", "popc", "and", "or", "cta", "warp", "aligned"},
    "barrier": {"sync", "arrive", "red", "popc", "and", "or", "cta", "aligned"},
    # control flow and miscellaneous (PTX ISA 9.7.12, 9.7.17)
    "bra": {"uni"}, "ret": {"uni"}, "exit": set(), "trap": set(), "brkpt": set(), "nanosleep": set(),
    "pmevent": {"mask"}, "griddepcontrol": {"launch_dependents", "wait"},
}.items()}


def unknown_modifiers(opcode: str, mods: set[str]) -> list[str]:
    """The modifiers of ``mods`` that ``opcode`` does not accept, sorted (empty when all are known).

    Raises KeyError for an opcode without an entry (the decoder only asks for opcodes it implements).
    """
    return sorted(mods - ALLOWED[opcode])
