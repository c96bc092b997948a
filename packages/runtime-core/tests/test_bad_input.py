"""Bad input to runtime_core: each case must raise a clear exception and leave no half-applied state.

Regression tests from adversarial testing; each names the defect it pins down.
"""

import json
import logging
import sqlite3
import threading

import numpy as np
import pytest

from runtime_core import Buffer, BufferSpec, Device, DeviceError, LRUAllocator, MallocAllocator, dtypes
from runtime_core.allocator import MAX_ALLOC_BYTES
from runtime_core.compiler import CompileError, Compiler
from runtime_core.ir import IRError, Kernel, KernelBuilder, Ops, UOp, validate
from runtime_core.ir_serial import FORMAT, dumps, loads

f32, i32 = dtypes.float32, dtypes.int32


# ---- allocators -------------------------------------------------------------------------------------------------

class Recording(LRUAllocator):
    """Hands out fresh objects; ``_free`` of a size in ``fail_sizes`` raises."""

    def __init__(self, max_cached_bytes=1 << 20, fail_sizes=()):
        super().__init__(max_cached_bytes=max_cached_bytes)
        self.fail_sizes, self.released = set(fail_sizes), []

    def _alloc(self, size, spec):
        return object()

    def _free(self, opaque, size, spec):
        if size in self.fail_sizes:
            raise RuntimeError(f"driver refused to free {size} bytes")
        self.released.append(opaque)


@pytest.mark.parametrize("size", [2**63, 2**64, 2**64 + 64])
def test_malloc_rejects_sizes_beyond_the_address_space(size):
    """2**64 bytes used to wrap to 0 in C's size_t and return a valid pointer to a tiny block."""
    with pytest.raises(ValueError, match="exceeds the largest possible allocation"):
        MallocAllocator().alloc(size)


def test_buffer_of_2_62_float32_elements_is_rejected_at_allocate():
    b = Buffer("CPU", 2**62, f32)
    with pytest.raises(ValueError, match=f"18446744073709551616 bytes exceeds.*{MAX_ALLOC_BYTES}"):
        b.allocate()
    assert not b.is_allocated


def test_free_cache_failure_never_hands_out_released_memory():
    a = Recording(fail_sizes={50})
    small, big = a.alloc(10), a.alloc(50)
    a.free(small, 10)
    a.free(big, 50)
    with pytest.raises(RuntimeError, match="refused"):
        a.free_cache()
    assert a.released == [small]  # the 10-byte block went back to the backend
    assert a.cached_bytes == 0 and not a.cache  # ... and neither block can be handed out again
    assert a.alloc(10) is not small


def test_lru_double_free_is_detected():
    a = Recording()
    h = a.alloc(64)
    a.free(h, 64)
    with pytest.raises(ValueError, match="double free"):
        a.free(h, 64)
    assert a.alloc(64) is h and a.alloc(64) is not h  # the handle was cached once, so it is handed out once


def test_malloc_double_free_is_detected_by_address():
    a = MallocAllocator()
    h = a.alloc(64)
    a.free(h, 64)
    with pytest.raises(ValueError, match="double free"):
        a.free(int(h), 64)
    x, y = a.alloc(64), a.alloc(64)
    assert x != y
    a.free(x, 64)
    a.free(y, 64)
    a.free_cache()


def test_free_none_is_rejected():
    """None used to enter the cache, and a later alloc returned None (= "not allocated" for a Buffer)."""
    a = Recording()
    with pytest.raises(ValueError, match="cannot free None"):
        a.free(None, 64)
    assert a.cached_bytes == 0


@pytest.mark.parametrize("bound, exc", [(1.5, TypeError), ("10", TypeError), (True, TypeError), (-1, ValueError)])
def test_lru_bound_must_be_a_nonnegative_int(bound, exc):
    with pytest.raises(exc, match="max_cached_bytes"):
        LRUAllocator(max_cached_bytes=bound)


def test_lru_bound_zero_caches_nothing():
    a = Recording(max_cached_bytes=0)
    h = a.alloc(8)
    a.free(h, 8)
    assert a.released == [h] and a.cached_bytes == 0


def test_lru_env_garbage_names_the_variable(monkeypatch):
    monkeypatch.setenv("RUNTIME_LRU_MAX_BYTES", "lots")
    with pytest.raises(ValueError, match=r"RUNTIME_LRU_MAX_BYTES='lots': expected an integer >= 0"):
        LRUAllocator()


def test_malloc_alignment_must_be_an_int():
    with pytest.raises(ValueError, match="power of two, got '64'"):
        MallocAllocator(alignment="64")


# ---- buffers ----------------------------------------------------------------------------------------------------

def test_buffer_spec_of_wrong_type_is_rejected_at_construction():
    with pytest.raises(TypeError, match="spec must be a BufferSpec"):
        Buffer("PYTHON", 4, f32, spec="uncached")


@pytest.mark.parametrize("data", ["abcd" * 4, None, 16, [0.0] * 4])
def test_copyin_of_non_bytes_names_what_is_accepted(data):
    b = Buffer.from_numpy("PYTHON", np.arange(4, dtype=np.float32))
    with pytest.raises(TypeError, match="copyin: expected bytes, bytearray, memoryview or a numpy array"):
        b.copyin(data)
    assert list(b.numpy()) == [0, 1, 2, 3]


def test_copyin_of_numpy_array_with_another_dtype_is_rejected():
    """An int32 array of the same byte size used to be copied bit for bit into a float32 buffer."""
    b = Buffer.from_numpy("PYTHON", np.arange(4, dtype=np.float32))
    with pytest.raises(ValueError, match="dtype int32, the buffer holds float32"):
        b.copyin(np.arange(4, dtype=np.int32))
    assert list(b.numpy()) == [0, 1, 2, 3]
    b.copyin(np.arange(4, dtype=np.float32).view(np.uint8) + 0)  # raw bytes as uint8 stay allowed
    assert list(b.numpy()) == [0, 1, 2, 3]


def test_copyin_of_read_only_and_strided_arrays_copies_the_values():
    b = Buffer("CPU", 4, f32).allocate()
    ro = np.arange(4, dtype=np.float32) + 10
    ro.setflags(write=False)
    b.copyin(ro)
    assert list(b.numpy()) == [10, 11, 12, 13]
    b.copyin(np.arange(8, dtype=np.float32)[::2])
    assert list(b.numpy()) == [0, 2, 4, 6]


def test_copyout_into_non_contiguous_array_is_rejected():
    """It used to copy into a temporary contiguous copy and leave the caller's array untouched."""
    b = Buffer.from_numpy("CPU", np.arange(4, dtype=np.float32))
    dest = np.full(8, -1, dtype=np.float32)
    with pytest.raises(ValueError, match="C-contiguous"):
        b.copyout(dest[::2])
    assert list(dest) == [-1] * 8


@pytest.mark.parametrize("dest, match", [(bytes(16), "read-only"), (bytearray(8), "16 bytes.*8 bytes"),
                                         (np.zeros(4, np.int32), "dtype int32")])
def test_copyout_into_bad_destination_writes_nothing(dest, match):
    b = Buffer.from_numpy("PYTHON", np.arange(4, dtype=np.float32))
    with pytest.raises(ValueError, match=match):
        b.copyout(dest)
    assert not any(bytes(dest))


def test_view_with_numpy_dtype_or_bad_size_is_rejected():
    b = Buffer("PYTHON", 4, f32).allocate()
    with pytest.raises(TypeError, match="dtype must be a DType"):
        b.view(1, np.float32, 0)
    with pytest.raises(ValueError, match="view size must be a positive int"):
        b.view(0, f32, 0)
    with pytest.raises(ValueError, match="view offset must be an int >= 0"):
        b.view(1, f32, -4)


def test_view_of_view_out_of_range_is_rejected():
    b = Buffer.from_numpy("PYTHON", np.arange(4, dtype=np.float32))
    v = b.view(2, f32, 4)
    assert list(v.view(1, f32, 4).numpy()) == [2]
    with pytest.raises(ValueError, match="8 bytes at offset 4 does not fit in a buffer of 8 bytes"):
        v.view(2, f32, 4)


@pytest.mark.parametrize("devname", ["PYTHON", "CPU"])
def test_view_is_stale_after_its_base_is_reallocated(devname):
    """A view kept its old handle after the base was freed and allocated again: a use after free on CPU."""
    b = Buffer.from_numpy(devname, np.arange(4, dtype=np.float32))
    v = b.view(2, f32, 4)
    b.deallocate()
    b.allocator.free_cache()  # the old memory is really released now
    b.allocate().copyin(np.arange(4, dtype=np.float32) + 100)
    with pytest.raises(RuntimeError, match="allocated again since the view was made"):
        v.numpy()
    with pytest.raises(RuntimeError, match="allocated again"):
        _ = v.opaque
    assert list(v.allocate().numpy()) == [101, 102]  # re-attaching gives the new memory


def test_view_cannot_adopt_a_handle():
    b = Buffer("PYTHON", 4, f32)
    v = b.view(1, f32, 0)
    b.allocate()
    with pytest.raises(ValueError, match="is a view"):
        v.allocate(np.zeros(4, np.uint8))


def test_copy_from_non_buffer_is_rejected():
    b = Buffer("PYTHON", 4, f32).allocate()
    with pytest.raises(TypeError, match="copy_from takes a Buffer.*copyin"):
        b.copy_from(np.zeros(4, np.float32))


# ---- device registry --------------------------------------------------------------------------------------------

@pytest.mark.parametrize("value", ["maybe", "1.0", "2x"])
def test_default_env_that_is_not_a_boolean_is_an_error(monkeypatch, value):
    """CPU=false used to select CPU; now every flag is parsed by runtime_core.config."""
    monkeypatch.setenv("CPU", value)
    with pytest.raises(DeviceError, match=f"CPU='{value}': expected a boolean"):
        _ = Device.DEFAULT


@pytest.mark.parametrize("value", ["1", "true", "Yes", "on"])
def test_default_env_true_words_request_the_backend(monkeypatch, value):
    monkeypatch.setenv("PYTHON", value)
    assert Device.DEFAULT == "PYTHON"


@pytest.mark.parametrize("value", ["0", "", " ", "false", "OFF"])
def test_default_env_zero_or_empty_requests_nothing(monkeypatch, value):
    monkeypatch.setenv("CPU", value)
    monkeypatch.setenv("PYTHON", "1")
    assert Device.DEFAULT == "PYTHON"


@pytest.mark.parametrize("name", ["", None, 123, b"CPU"])
def test_device_name_of_wrong_type(name):
    with pytest.raises(DeviceError, match="non-empty string"):
        Device[name]


def test_failed_open_lists_registered_backends():
    with pytest.raises(DeviceError, match="registered backends: .*CPU.*PYTHON"):
        Device["cpu:abc"]


# ---- compiler cache ---------------------------------------------------------------------------------------------

class Echo(Compiler):
    def __init__(self):
        super().__init__("echo")
        self.calls = 0

    def compile(self, src):
        self.calls += 1
        if "error" in src:
            raise CompileError("bad source", stderr="1: error", source=src)
        return src.encode()


@pytest.fixture
def cache_db(tmp_path, monkeypatch):
    db = tmp_path / "cache.db"
    monkeypatch.setenv("RUNTIME_CACHE_DB", str(db))
    monkeypatch.delenv("RUNTIME_DISABLE_COMPILE_CACHE", raising=False)
    return db


def test_cache_row_with_wrong_types_is_recompiled(cache_db, caplog):
    """A row whose lib is TEXT (or digest an int) used to raise TypeError from hashlib."""
    c = Echo()
    c.compile_cached("a")
    with sqlite3.connect(cache_db) as conn:
        conn.execute("UPDATE compiled SET digest = 5, lib = 'text'")
    got: list[bytes] = []
    reader = threading.Thread(target=lambda: got.append(c.compile_cached("a")))  # a thread without this one's memo
    with caplog.at_level(logging.WARNING, logger="runtime_core.compiler"):
        reader.start()
        reader.join()
    assert got == [b"a"] and c.calls == 2 and "corrupt" in caplog.text
    with sqlite3.connect(cache_db) as conn:  # the rewritten entry is intact again
        assert conn.execute("SELECT lib FROM compiled").fetchone()[0] == b"a"


def test_cache_that_is_not_a_database_is_bypassed_with_a_log_line(cache_db, caplog):
    cache_db.write_bytes(b"garbage" * 100)
    with caplog.at_level(logging.WARNING, logger="runtime_core.compiler"):
        assert Echo().compile_cached("a") == b"a"
    assert "unreadable" in caplog.text and cache_db.read_bytes() == b"garbage" * 100


def test_cache_under_a_regular_file_is_bypassed(tmp_path, monkeypatch, caplog):
    (tmp_path / "file").write_text("x")
    monkeypatch.setenv("RUNTIME_CACHE_DB", str(tmp_path / "file" / "sub" / "cache.db"))
    with caplog.at_level(logging.WARNING, logger="runtime_core.compiler"):
        assert Echo().compile_cached("a") == b"a"
    assert "not writable" in caplog.text


def test_failed_compile_leaves_cache_intact(cache_db):
    c = Echo()
    c.compile_cached("good")
    with pytest.raises(CompileError, match="bad source"):
        c.compile_cached("error")
    with sqlite3.connect(cache_db) as conn:
        assert conn.execute("SELECT COUNT(*) FROM compiled").fetchone() == (1,)
    assert c.compile_cached("good") == b"good" and c.calls == 2


@pytest.mark.parametrize("src", [None, b"abc", 5])
def test_compile_cached_of_non_str_source(cache_db, src):
    with pytest.raises(TypeError, match="source must be a str"):
        Echo().compile_cached(src)


# ---- kernel IR --------------------------------------------------------------------------------------------------

def _c(value=1.0, dt=f32):
    return UOp(Ops.CONST, dt, (), value)


@pytest.mark.parametrize("name", [5, "a b", "", "kérnel", None])
def test_kernel_name_must_be_an_ascii_identifier(name):
    with pytest.raises(IRError, match="kernel name must be an ASCII identifier"):
        validate(Kernel(name, []))


def test_kernel_with_zero_ops_is_valid():
    assert validate(Kernel("empty", [])).ops == []


@pytest.mark.parametrize("ops, match", [
    ([1], "op 0 is int, not a UOp"),
    ([UOp("ADD", f32, ())], "not a member of Ops"),
    ([UOp(Ops.NEG, f32, [_c()])], "src must be a tuple of UOp"),
    ([UOp(Ops.NEG, f32, (1,))], "src must be a tuple of UOp"),
    ([UOp(Ops.NEG, f32, None)], "src must be a tuple of UOp"),
])
def test_malformed_op_structure_raises_irerror(ops, match):
    with pytest.raises(IRError, match=match):
        validate(Kernel("k", ops))


def test_ops_that_are_not_a_list_raise_irerror():
    with pytest.raises(IRError, match="ops must be a list"):
        Kernel("k", None)


def test_the_same_op_object_twice_is_rejected():
    c = _c()
    with pytest.raises(IRError, match="op 1 CONST: is the same object as op 0"):
        validate(Kernel("k", [c, c]))


def test_an_op_shared_by_two_kernels_is_fine():
    c = _c()
    assert validate(Kernel("k1", [c])) and validate(Kernel("k2", [c]))


def test_cycle_is_rejected():
    a = UOp(Ops.NEG, f32, (), None)
    a.src = (a,)
    with pytest.raises(IRError, match="before its definition"):
        validate(Kernel("k", [a]))


@pytest.mark.parametrize("op, dtype, nsrc", [(Ops.NEG, f32, 1), (Ops.ADD, f32, 2), (Ops.ACC, f32, 1),
                                             (Ops.CAST, i32, 1), (Ops.BITCAST, i32, 1)])
def test_pointers_are_not_values(op, dtype, nsrc):
    p = UOp(Ops.PARAM, f32, (), 0)
    with pytest.raises(IRError, match="uses the PARAM pointer .op 0. as source 0"):
        validate(Kernel("k", [p, UOp(op, dtype, (p,) * nsrc)]))


def test_pointer_as_load_index_is_rejected():
    p = UOp(Ops.PARAM, i32, (), 0)
    with pytest.raises(IRError, match="as source 1"):
        validate(Kernel("k", [p, UOp(Ops.LOAD, i32, (p, p))]))


@pytest.mark.parametrize("value, dt", [(2**40, i32), (float("nan"), i32), (float("inf"), dtypes.int64), (-1, dtypes.uint8),
                                       (10**400, f32), ("1", f32), (True, i32), (1, dtypes.bool)],
                         ids=["2**40-int32", "nan-int32", "inf-int64", "-1-uint8", "10**400-float32", "str-float32",
                              "bool-int32", "int-bool"])
def test_invalid_constants(value, dt):
    with pytest.raises(IRError, match="is not a valid"):
        validate(Kernel("k", [_c(value, dt)]))


@pytest.mark.parametrize("arg", [("group", True), ("group", 1.0), ("local", 3)])
def test_special_dim_must_be_an_int(arg):
    with pytest.raises(IRError, match="arg must be"):
        validate(Kernel("k", [UOp(Ops.SPECIAL, i32, (), arg)]))


def test_local_count_must_be_an_int():
    with pytest.raises(IRError, match="element count"):
        validate(Kernel("k", [UOp(Ops.LOCAL, f32, (), ("x", True))]))


@pytest.mark.parametrize("size", [(True, 1, 1), None, (1, 1), (0, 1, 1), "abc"])
def test_launch_shape_must_be_three_positive_ints(size):
    with pytest.raises(IRError, match="global_size must be 3 positive ints"):
        validate(Kernel("k", [], size))


def test_duplicate_var_and_local_names_are_rejected():
    with pytest.raises(IRError, match=r"VAR names must be unique, repeated: \['n'\]"):
        validate(Kernel("k", [UOp(Ops.VAR, i32, (), "n"), UOp(Ops.VAR, i32, (), "n")]))
    with pytest.raises(IRError, match=r"LOCAL names must be unique, repeated: \['t'\]"):
        validate(Kernel("k", [UOp(Ops.LOCAL, f32, (), ("t", 4)), UOp(Ops.LOCAL, f32, (), ("t", 4))]))


def test_param_slots_of_mixed_types_raise_irerror():
    """Sorting slots None and 0 used to raise TypeError while building the Kernel."""
    with pytest.raises(IRError, match="slot must be an int"):
        validate(Kernel("k", [UOp(Ops.PARAM, f32, (), None), UOp(Ops.PARAM, f32, (), 0)]))


_NSRC_EXPECTED = {Ops.PARAM: {0}, Ops.VAR: {0}, Ops.SPECIAL: {0}, Ops.CONST: {0}, Ops.LOCAL: {0}, Ops.BARRIER: {0},
                  Ops.ACC: {1}, Ops.CAST: {1}, Ops.BITCAST: {1}, Ops.ENDRANGE: {1}, Ops.IF: {1}, Ops.ENDIF: {1},
                  Ops.ASSIGN: {2}, Ops.RANGE: {2}, Ops.WHERE: {3}, Ops.FMA: {3}, Ops.LOAD: {2, 4}, Ops.STORE: {3, 4},
                  **{op: {1} for op in (Ops.NEG, Ops.EXP2, Ops.LOG2, Ops.SIN, Ops.SQRT, Ops.RECIP, Ops.TRUNC)}}


@pytest.mark.parametrize("op", list(Ops), ids=lambda op: op.name)
def test_wrong_source_counts_and_dtypes_raise_irerror(op):
    c = _c()
    for n in range(6):
        for dt in (f32, None, "float32"):
            k = Kernel("k", [c, UOp(op, dt, (c,) * n)])
            if n not in _NSRC_EXPECTED.get(op, {2}):
                with pytest.raises(IRError, match="sources"):
                    validate(k)
            else:
                try:
                    validate(k)
                except IRError:
                    pass  # invalid for another reason (dtype, scope): fine, as long as it is an IRError


def test_validate_walks_a_100k_op_chain_without_recursion():
    """A chain 100,000 ops deep validates (an iterative walk: no RecursionError); its speed is the compile
    benchmarks' business, not a timed test's."""
    ops = [_c()]
    for _ in range(100_000):
        ops.append(UOp(Ops.ADD, f32, (ops[-1], ops[0])))
    validate(Kernel("big", ops))
    with pytest.raises(IRError):
        validate(Kernel("big", [*ops, UOp(Ops.ADD, f32, (ops[-1], UOp(Ops.CONST, f32, (), 1.0)))][::-1]))


def test_deeply_nested_loops_validate_and_round_trip():
    kb = KernelBuilder("deep")
    out = kb.buffer(i32)
    ranges = []
    for _ in range(200):
        ranges.append(kb.emit(Ops.RANGE, i32, (kb.const(0, i32), kb.const(2, i32))))
    kb.store(out, 0, ranges[-1])
    for r in reversed(ranges):
        kb.emit(Ops.ENDRANGE, None, (r,))
    k = kb.build()
    assert len(loads(dumps(k)).ops) == len(k.ops)


# ---- ir_serial --------------------------------------------------------------------------------------------------

def _doc(**kw):
    d = {"format": FORMAT, "name": "k", "global_size": [1, 1, 1], "local_size": [1, 1, 1], "ops": []}
    d.update(kw)
    return json.dumps(d)


@pytest.mark.parametrize("text, match", [
    ("[]", "top level is a JSON list"),
    ("null", "top level is a JSON NoneType"),
    ("1", "top level is a JSON int"),
    ("[" * 100_000 + "]" * 100_000, "nested too deeply|top level"),
    ('{"a":' * 100_000 + "1" + "}" * 100_000, "nested too deeply|format"),
    (_doc(name=5), "kernel name"),
    (_doc(name=[1]), "kernel name"),
    (_doc(global_size=[True, 1, 1]), "global_size"),
    (_doc(ops=[["LOCAL", "float32", [], {"t": ["x", True]}]]), "element count"),
    (_doc(ops=[["CONST", "int32", [], {"f": "nan"}]]), "not a valid int32"),
    (_doc(ops=[["CONST", "int32", [], 1]] * 2 + [["ADD", "int32", [0, 0.5], None]]), "source index"),
    ('{"format": "runtime-ir/1", "name": "k", "global_size": [' + "9" * 5000 + ", 1, 1]}", "malformed"),
], ids=["list", "null", "int", "deep-list", "deep-dict", "name-int", "name-list", "size-bool", "local-bool",
        "nan-int", "src-float", "5000-digits"])
def test_hostile_ir_json_raises_irerror(text, match):
    with pytest.raises(IRError, match=match):
        loads(text)


def test_hostile_deep_argument_nesting_raises_irerror():
    arg = '{"t":[' * 400 + "]}" * 400
    text = _doc(ops=[]).replace('"ops": []', f'"ops": [["SPECIAL", "int32", [], {arg}]]')
    with pytest.raises(IRError, match="op 0 SPECIAL: arg must be"):
        loads(text)


@pytest.mark.parametrize("kwargs", [{"external_ptr": 0}, {"external_ptr": -5}, {"external_ptr": "abc"},
                                    {"external_ptr": 1.5}, {"external_ptr": True}, {"uncached": "no"}, {"nolru": 1}])
def test_buffer_spec_fields_are_checked(kwargs):
    """external_ptr=0 used to become the handle of a CPU buffer, and the first copyin wrote to NULL."""
    with pytest.raises(TypeError, match="BufferSpec"):
        BufferSpec(**kwargs)
