"""Bad input to the CPU and PYTHON backends: each case must raise a clear exception before anything runs natively,
never crash the process, and leave buffers and the compile cache intact.

Regression tests from adversarial testing; each names the defect it pins down.
"""

from __future__ import annotations

import ctypes
import io
import shutil
import sqlite3
import struct
import subprocess
import threading

import numpy as np
import pytest
from elftools.elf.elffile import ELFFile

from runtime_backends.cpu import compiler as cpu_compiler
from runtime_backends.cpu.abi import MAX_PARAMS, SIGNATURE_MAGIC
from runtime_backends.cpu.compiler import ClangCompiler, CompilerNotFoundError
from runtime_backends.cpu.elf import RelocatableObject
from runtime_backends.cpu.program import CPUProgram
from runtime_backends.cpu.renderer import CRenderer
from runtime_backends.python.device import MAX_THREADS
from runtime_core import Buffer, Device, dtypes
from runtime_core.compiler import CompileError
from runtime_core.ir import Kernel, KernelBuilder, Ops, UOp
from runtime_core.ir_serial import dumps

f32, i32 = dtypes.float32, dtypes.int32
PLAIN_C = f"const int rtk_signature[5] = {{{SIGNATURE_MAGIC:#x}, 0, 0, 0, 0}};\nint f(int x) {{ return 3 * x + 1; }}\n"


@pytest.fixture(autouse=True)
def cache_db(tmp_path, monkeypatch):
    db = tmp_path / "cache.db"
    monkeypatch.setenv("RUNTIME_CACHE_DB", str(db))
    monkeypatch.delenv("RUNTIME_DISABLE_COMPILE_CACHE", raising=False)
    return db


@pytest.fixture(scope="module")
def cc() -> ClangCompiler:
    return ClangCompiler(None)  # $CC, else clang


def guarded_add_one() -> Kernel:
    """a[i] += 1 for i < n (n a val): with n = 0 nothing touches memory, so a missing check cannot crash the test."""
    kb = KernelBuilder("guarded_add_one", (4,))
    a, n = kb.buffer(f32), kb.var("n")
    i = kb.global_id(0)
    with kb.if_(kb.lt(i, n)):
        kb.store(a, i, kb.add(kb.load(a, i), 1.0))
    return kb.build()


def program(device: str, kernel: Kernel):
    dev = Device[device]
    return dev.runtime(kernel.name, dev.compiler.compile_cached(dev.renderer.render(kernel)))


def fake_cc(tmp_path, name: str, body: str) -> str:
    """A shell script that answers ``--version`` like GCC and runs ``body`` for a compile (last argument: output)."""
    path = tmp_path / name
    path.write_text(f'#!/bin/sh\nif [ "$1" = "--version" ]; then echo "gcc (fake) 1.0"; exit 0; fi\n'
                    f'for a in "$@"; do out="$a"; done\n{body}\n')
    path.chmod(0o755)
    return str(path)


# ---- CPU launches -----------------------------------------------------------------------------------------------

@pytest.mark.parametrize("handle", [100, 2**56, 2**64, 2**70], ids=["low", "2**56", "2**64", "2**70"])
def test_cpu_handle_outside_user_space_is_rejected(handle):
    """2**64 used to wrap to NULL in ctypes and crash the process."""
    with pytest.raises(ValueError, match="not a user-space address"):
        program("CPU", guarded_add_one())(handle, vals=(0,))


def test_python_handle_passed_to_cpu_program_is_rejected():
    b = Buffer("PYTHON", 4, f32).allocate()
    with pytest.raises(ValueError, match="buffer 0 must be a host address"):
        program("CPU", guarded_add_one())(b.opaque, vals=(4,))


def test_cpu_handle_passed_to_python_program_is_rejected():
    b = Buffer("CPU", 4, f32).allocate()
    with pytest.raises(TypeError, match="not a PYTHON device buffer handle"):
        program("PYTHON", guarded_add_one())(b.opaque, vals=(4,))


@pytest.mark.parametrize("devname", ["CPU", "PYTHON"])
@pytest.mark.parametrize("kwargs, exc, match", [
    ({"global_size": (0,)}, ValueError, "global_size must be 1-3 positive ints"),
    ({"global_size": (-1, 1, 1)}, ValueError, "global_size must be 1-3 positive ints"),
    ({"local_size": (1, 1, 1, 1)}, ValueError, "local_size must be 1-3 positive ints"),
    ({"vals": (2**31,)}, ValueError, "vals must be int32"),
    ({"vals": (-(2**31) - 1,)}, ValueError, "vals must be int32"),
    ({"vals": ()}, ValueError, "takes 1 int vals, got 0"),
    ({"vals": (1, 2)}, ValueError, "takes 1 int vals, got 2"),
    ({"global_size": (2**40, 1, 1)}, ValueError, "exceed"),
])
def test_bad_launch_changes_nothing(devname, kwargs, exc, match):
    b = Buffer.from_numpy(devname, np.arange(4, dtype=np.float32))
    kwargs = {"vals": (4,), **kwargs}
    with pytest.raises(exc, match=match):
        program(devname, guarded_add_one())(b.opaque, **kwargs)
    assert list(b.numpy()) == [0, 1, 2, 3]


def test_cpu_renderer_rejects_more_params_than_the_calling_convention_allows():
    kb = KernelBuilder("many")
    for _ in range(MAX_PARAMS + 1):
        kb.buffer(f32)
    with pytest.raises(ValueError, match=f"takes {MAX_PARAMS + 1} buffers and vals.*at most {MAX_PARAMS}"):
        CRenderer().render(kb.build())


# ---- CPU objects and the ELF loader -----------------------------------------------------------------------------

def _section_header_offset(obj: bytes, name: str) -> int:
    elf = ELFFile(io.BytesIO(obj))
    index = next(i for i, s in enumerate(elf.iter_sections()) if s.name == name)
    return elf["e_shoff"] + index * elf["e_shentsize"]


def _patch(obj: bytes, offset: int, value: int) -> bytes:
    out = bytearray(obj)
    struct.pack_into("<Q", out, offset, value)
    return bytes(out)


@pytest.mark.parametrize("lib, exc, match", [
    (b"", CompileError, "cannot parse"), (b"garbage", CompileError, "cannot parse"),
    (None, TypeError, "must be bytes"), ("text", TypeError, "must be bytes"),
])
def test_cpu_program_from_garbage(lib, exc, match):
    with pytest.raises(exc, match=match):
        CPUProgram(None, "f", lib)


def test_truncated_objects_raise_compile_error(cc):
    obj = cc.compile(PLAIN_C)
    for n in (4, 16, 64, len(obj) // 2, len(obj) - 1):
        with pytest.raises(CompileError, match=rf"cannot parse the object file \({n} bytes\)"):
            CPUProgram(None, "f", obj[:n])


def test_section_data_beyond_end_of_file_is_rejected(cc):
    """A section whose data ran past EOF used to be copied short, shifting the rest of the image, and loaded."""
    obj = cc.compile(PLAIN_C)
    bad = _patch(obj, _section_header_offset(obj, ".text") + 24, len(obj) - 2)  # sh_offset
    with pytest.raises(CompileError, match=r"section \.text claims .* holds only 2"):
        CPUProgram(None, "f", bad)


@pytest.mark.parametrize("field, value, match", [(32, 2**40, "claims"), (32, 2**63, "cannot parse"),
                                                  (48, 2**40, "alignment")], ids=["size-2**40", "size-2**63", "align"])
def test_absurd_section_sizes_and_alignment_are_rejected(cc, field, value, match):
    obj = cc.compile(PLAIN_C)
    with pytest.raises(CompileError, match=match):
        RelocatableObject(_patch(obj, _section_header_offset(obj, ".text") + field, value))


def test_huge_bss_is_rejected_before_allocating(cc):
    obj = cc.compile(PLAIN_C.replace("int f(", "char big[1];\nint f(") + "char *g(void) { return big; }\n")
    elf = ELFFile(io.BytesIO(obj))
    name = next(s.name for s in elf.iter_sections() if s["sh_type"] == "SHT_NOBITS" and s["sh_size"])
    with pytest.raises(CompileError, match="more than the loader's limit"):
        RelocatableObject(_patch(obj, _section_header_offset(obj, name) + 32, 2**40))


def test_signature_with_absurd_argument_count_is_rejected(cc):
    obj = cc.compile(PLAIN_C.replace(f"{SIGNATURE_MAGIC:#x}, 0, 0", f"{SIGNATURE_MAGIC:#x}, {MAX_PARAMS + 1}, 0"))
    with pytest.raises(CompileError, match="rtk_signature record"):
        CPUProgram(None, "f", obj)


@pytest.mark.skipif(shutil.which("gcc") is None, reason="gcc is not installed")
@pytest.mark.parametrize("flags, kind", [(["-shared", "-fPIC", "-nostdlib"], "ET_DYN"), (["-no-pie"], "ET_EXEC")])
def test_linked_objects_are_not_relocatable(tmp_path, flags, kind):
    src = tmp_path / "m.c"
    src.write_text("int main(void) { return 0; }\n")
    out = tmp_path / "m.out"
    subprocess.run(["gcc", *flags, "-o", str(out), str(src)], check=True, capture_output=True)
    with pytest.raises(CompileError, match=f"relocatable object, got ELF64 LE {kind}"):
        CPUProgram(None, "main", out.read_bytes())


# ---- the C compiler driver --------------------------------------------------------------------------------------

def test_missing_and_failing_compilers_say_how_to_fix(tmp_path):
    for name in (str(tmp_path / "no-such-cc"), "false"):
        with pytest.raises(CompilerNotFoundError, match="apt-get install clang"):
            ClangCompiler(cc=name)


def test_compiler_that_writes_nothing_is_an_error_and_nothing_is_cached(tmp_path, cache_db):
    c = ClangCompiler("bad-cc", cc=fake_cc(tmp_path, "quiet-cc", "echo 'all good'; exit 0"))
    with pytest.raises(CompileError, match="exited 0 but wrote no object file"):
        c.compile_cached(PLAIN_C)
    with sqlite3.connect(cache_db) as conn:
        assert conn.execute("SELECT COUNT(*) FROM compiled").fetchone() == (0,)


def test_compiler_that_writes_garbage_is_an_error_and_nothing_is_cached(tmp_path, cache_db):
    """The garbage used to be returned and cached, so every later load failed until the cache was deleted."""
    c = ClangCompiler("bad-cc", cc=fake_cc(tmp_path, "garbage-cc", "printf garbage > \"$out\"; exit 0"))
    with pytest.raises(CompileError, match="wrote 7 bytes that are not an ELF object"):
        c.compile_cached(PLAIN_C)
    with sqlite3.connect(cache_db) as conn:
        assert conn.execute("SELECT COUNT(*) FROM compiled").fetchone() == (0,)


def test_hanging_compiler_times_out(tmp_path, monkeypatch):
    monkeypatch.setattr(cpu_compiler, "COMPILE_TIMEOUT_S", 1)
    c = ClangCompiler(None, cc=fake_cc(tmp_path, "slow-cc", "exec sleep 30"))
    with pytest.raises(CompileError, match="did not finish within 1 s"):
        c.compile(PLAIN_C)


def test_concurrent_compile_cached_from_threads(cc, cache_db):
    c = ClangCompiler("threads")
    results, errors = [], []

    def work():
        try:
            results.append(c.compile_cached(PLAIN_C))
        except Exception as e:  # collected and asserted below
            errors.append(e)

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == [] and len(results) == 4 and len(set(results)) == 1
    f = CPUProgram(None, "f", results[0])._image.function("f", ctypes.c_int, [ctypes.c_int])
    assert f(5) == 16


# ---- PYTHON -----------------------------------------------------------------------------------------------------

def test_python_out_of_bounds_names_thread_and_index():
    kb = KernelBuilder("oob", (2,), (4,))
    a = kb.buffer(f32)
    i = kb.global_id(0)
    kb.store(a, i, kb.add(kb.load(a, i), 1.0))
    b = Buffer.from_numpy("PYTHON", np.zeros(6, np.float32))
    with pytest.raises(IndexError, match=r"thread 6 \(group 1, local 2\) index 6 of buffer 0 with 6 elements"):
        program("PYTHON", kb.build())(b.opaque, global_size=(2,), local_size=(4,))
    assert list(b.numpy()) == [0] * 6  # the failing LOAD comes before any STORE


def test_python_gated_out_of_range_load_and_store_with_false_gate_do_not_raise():
    kb = KernelBuilder("gated_far", (1,), (8,))
    src, dst = kb.buffer(f32), kb.buffer(f32)
    i = kb.global_id(0)
    inside = kb.lt(i, 4)
    value = kb.load(src, kb.where(inside, i, kb.add(i, 10**6)), inside, alt=-1.0)
    kb.store(dst, i, value)
    kb.store(dst, kb.sub(i, 10**6), value, kb.lt(i, 0))  # never executed: gate false everywhere
    s = Buffer.from_numpy("PYTHON", np.arange(8, dtype=np.float32))
    d = Buffer.from_numpy("PYTHON", np.zeros(8, np.float32))
    program("PYTHON", kb.build())(s.opaque, d.opaque, global_size=(1,), local_size=(8,))
    assert list(d.numpy()) == [0, 1, 2, 3, -1, -1, -1, -1]


def _local_kernel(count: int) -> Kernel:
    kb = KernelBuilder("with_local", (1,), (4,))
    out = kb.buffer(f32)
    tmp = kb.local("tmp", f32, count)
    lid = kb.special("local", 0)
    kb.store(tmp, lid, 1.0)
    kb.barrier()
    kb.store(out, lid, kb.load(tmp, lid))
    return kb.build()


def test_python_local_memory_over_the_limit_is_rejected_even_without_the_renderer():
    """IR text given straight to the compiler (or the program) used to skip the 48 KiB check and allocate it all."""
    dev = Device["PYTHON"]
    text = dumps(_local_kernel(100_000))
    with pytest.raises(CompileError, match="needs 400000 bytes of local memory, the device has 49152"):
        dev.compiler.compile(text)
    with pytest.raises(CompileError, match="local memory"):
        dev.runtime("with_local", text.encode())


@pytest.mark.parametrize("local_size", [(2048, 1, 1), (32, 64, 1), (1, 1, 128)])
def test_python_groups_beyond_limits_are_rejected(local_size):
    out = Buffer("PYTHON", 4, f32).allocate()
    for kernel in (_local_kernel(4), guarded_add_one()):
        vals = (0,) if kernel.vars else ()
        with pytest.raises(ValueError, match="exceeds the PYTHON device's limits"):
            program("PYTHON", kernel)(out.opaque, global_size=(1,), local_size=local_size, vals=vals)


def test_python_launch_beyond_thread_limit_is_rejected_before_allocating():
    b = Buffer("PYTHON", 4, f32).allocate()
    with pytest.raises(ValueError, match=f"exceed the PYTHON interpreter's limit of {MAX_THREADS}"):
        program("PYTHON", guarded_add_one())(b.opaque, global_size=(2**31 - 1, 2**31 - 1, 2**31 - 1), vals=(0,))


@pytest.mark.parametrize("make", [lambda: np.zeros(32, np.uint8)[::2], lambda: np.zeros(16, np.uint8).reshape(4, 4)],
                         ids=["strided", "2d"])
def test_python_handles_that_are_not_plain_byte_arrays_are_rejected(make):
    with pytest.raises((TypeError, ValueError), match="buffer 0"):
        program("PYTHON", guarded_add_one())(make(), vals=(4,))


def test_python_read_only_handle_is_rejected_before_running():
    h = np.zeros(16, np.uint8)
    h.setflags(write=False)
    with pytest.raises(ValueError, match="contiguous, writable"):
        program("PYTHON", guarded_add_one())(h, vals=(4,))


def test_pointer_used_as_value_is_rejected_by_both_backends():
    p = UOp(Ops.PARAM, f32, (), 0)
    k = Kernel("ptr_math", [p, UOp(Ops.NEG, f32, (p,))])
    for devname in ("CPU", "PYTHON"):
        with pytest.raises(ValueError, match="PARAM pointer"):
            Device[devname].renderer.render(k)


@pytest.mark.parametrize("name", ["int", "for", "_Bool", "bool", "true", "nullptr", "__int128", "__asm__",
                                  "__attribute__", "_Pragma", "__func__", "sinf", "memset", "rtk_signature"])
def test_cpu_kernel_names_that_cannot_be_the_symbol_are_rejected_by_the_renderer(name):
    """Reserved identifiers (``__int128``, ``_Pragma``) used to pass the renderer and fail in the C compiler."""
    kb = KernelBuilder(name)
    kb.store(kb.buffer(i32), 0, 7)
    with pytest.raises(ValueError, match=f"kernel name '{name}' must be an ASCII C identifier"):
        CRenderer().render(kb.build())


@pytest.mark.parametrize("name", ["main", "b0", "gsz0", "v1", "half", "NULL"])
def test_cpu_kernel_names_that_look_like_generated_names_still_work(name):
    kb = KernelBuilder(name)
    kb.store(kb.buffer(i32), 0, 7)
    b = Buffer("CPU", 1, i32).allocate()
    program("CPU", kb.build())(b.opaque)
    assert list(b.numpy()) == [7]
