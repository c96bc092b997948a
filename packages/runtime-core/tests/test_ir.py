import math

import pytest

from runtime_core import dtypes
from runtime_core.ir import IRError, Kernel, KernelBuilder, Ops, UOp, validate
from runtime_core.ir_serial import dumps, loads


def simple():
    kb = KernelBuilder("k", (4,))
    out = kb.buffer(dtypes.float32)
    i = kb.global_id(0)
    return kb, out, i


def test_builder_makes_valid_kernel_with_buffers_and_vars():
    kb, out, i = simple()
    n = kb.var("n")
    with kb.if_(kb.lt(i, n)):
        kb.store(out, i, 1.5)
    k = kb.build()
    assert [u.arg for u in k.buffers] == [0] and [u.arg for u in k.vars] == ["n"] and k.written_buffers() == {0}


@pytest.mark.parametrize("build, message", [
    (lambda kb, out, i: kb.emit(Ops.ADD, dtypes.float32, (i, kb.const(1.0, dtypes.float32))), "share one dtype"),
    (lambda kb, out, i: kb.emit(Ops.IDIV, dtypes.float32, (kb.const(1.0, dtypes.float32),) * 2), "integers only"),
    (lambda kb, out, i: kb.emit(Ops.SQRT, dtypes.int32, (i,)), "floats only"),
    (lambda kb, out, i: kb.emit(Ops.CMPLT, dtypes.int32, (i, i)), "gives bool"),
    (lambda kb, out, i: kb.emit(Ops.STORE, None, (out, i, i)), "stores int32 to a float32"),
    (lambda kb, out, i: kb.emit(Ops.LOAD, dtypes.float32, (i, i)), "PARAM or LOCAL"),
    (lambda kb, out, i: kb.emit(Ops.CONST, dtypes.int8, arg=300), "not a valid int8"),
    (lambda kb, out, i: kb.emit(Ops.BITCAST, dtypes.float64, (i,)), "changes the size"),
    (lambda kb, out, i: kb.emit(Ops.IF, None, (i,)), "condition must be bool"),
    (lambda kb, out, i: kb.emit(Ops.ADD, dtypes.bool, (kb.lt(i, 2),) * 2), "arithmetic on bool"),
])
def test_validator_rejects_malformed_ops_naming_them(build, message):
    kb, out, i = simple()
    build(kb, out, i)
    with pytest.raises(IRError, match=message) as e:
        kb.build()
    assert "op " in str(e.value)


def test_use_before_definition_is_rejected():
    kb, out, i = simple()
    later = UOp(Ops.CONST, dtypes.float32, (), 1.0)
    kb.emit(Ops.STORE, None, (out, i, later))
    kb.ops.append(later)
    with pytest.raises(IRError, match="before its definition"):
        kb.build()


def test_value_from_inside_a_loop_cannot_escape():
    kb, out, i = simple()
    with kb.range(0, 4) as r:
        inner = kb.cast(r, dtypes.float32)
    kb.store(out, i, inner)
    with pytest.raises(IRError, match="outside the block"):
        kb.build()


def test_unbalanced_blocks_are_rejected():
    kb, out, i = simple()
    kb.emit(Ops.RANGE, dtypes.int32, (kb.const(0, dtypes.int32), kb.const(3, dtypes.int32)))
    with pytest.raises(IRError, match="never closed"):
        kb.build()
    kb2, out2, i2 = simple()
    c = kb2.emit(Ops.IF, None, (kb2.lt(i2, 2),))
    kb2.emit(Ops.RANGE, dtypes.int32, (kb2.const(0, dtypes.int32), kb2.const(3, dtypes.int32)))
    kb2.emit(Ops.ENDIF, None, (c,))
    with pytest.raises(IRError, match="innermost open block is RANGE"):
        kb2.build()


def test_barrier_rules():
    kb, out, i = simple()
    kb.barrier()
    with pytest.raises(IRError, match="needs local memory"):
        kb.build()
    kb, out, i = simple()
    kb.local("smem", dtypes.float32, 16)
    with kb.if_(kb.lt(i, 2)):
        kb.barrier()
    with pytest.raises(IRError, match="divergent barrier"):
        kb.build()


def test_param_slots_must_be_dense():
    k = Kernel("k", [UOp(Ops.PARAM, dtypes.float32, (), 1)])
    with pytest.raises(IRError, match="slots"):
        validate(k)


def test_serialization_round_trips_special_floats_and_big_ints():
    kb, out, i = simple()
    big = kb.const(2**64 - 1, dtypes.uint64)
    vals = [kb.const(v, dtypes.float64) for v in (math.inf, -math.inf, math.nan, 0.1, -0.0)]
    kb.store(out, i, kb.cast(kb.add(vals[3], kb.cast(big, dtypes.float64)), dtypes.float32))
    k = kb.build()
    k2 = loads(dumps(k))
    assert dumps(k2) == dumps(k)
    args = [u.arg for u in k2.ops if u.op is Ops.CONST]
    assert args[0] == 2**64 - 1 and args[1] == math.inf and math.isnan(args[3]) and args[4] == 0.1
    assert math.copysign(1, args[5]) == -1


@pytest.mark.parametrize("text, said", [
    ("", "malformed IR document: JSONDecodeError"),
    ("{}", r"not a runtime-ir/1 document \(format=None\)"),
    ('{"format": "runtime-ir/1", "ops": [["NOPE", null, [], null]]}', "malformed IR document: KeyError: 'NOPE'"),
    ('{"format": "runtime-ir/1", "name": "k", "global_size": [1,1,1], "local_size": [1,1,1], '
     '"ops": [["ADD", "int32", [5, 6], null]]}', r"op 0 ADD: source index out of range \[5, 6\]"),
])
def test_loads_rejects_garbage_with_irerror(text, said):
    with pytest.raises(IRError, match=said):
        loads(text)
