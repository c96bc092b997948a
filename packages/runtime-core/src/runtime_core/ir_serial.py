"""A lossless text form of a :class:`~runtime_core.ir.Kernel` (JSON), for backends whose "binary" is the IR itself."""

from __future__ import annotations

import json
import math
from typing import Any

from runtime_core.dtype import dtypes
from runtime_core.ir import IRError, Kernel, Ops, UOp, validate

__all__ = ["dumps", "loads"]

FORMAT = "runtime-ir/1"


def _enc_arg(arg: Any) -> Any:
    if isinstance(arg, float):
        return {"f": arg.hex()} if math.isfinite(arg) else {"f": repr(arg)}
    if isinstance(arg, tuple):
        return {"t": [_enc_arg(a) for a in arg]}
    return arg


def _dec_arg(arg: Any) -> Any:
    if isinstance(arg, dict):
        if "f" in arg:
            s = arg["f"]
            return float(s) if s in ("inf", "-inf", "nan") else float.fromhex(s)
        if "t" in arg:
            return tuple(_dec_arg(a) for a in arg["t"])
        raise IRError(f"bad argument encoding {arg!r}")
    return arg


def dumps(kernel: Kernel) -> str:
    """The JSON text of ``kernel`` (ops reference their sources by index)."""
    index = {id(u): i for i, u in enumerate(kernel.ops)}
    ops = [[u.op.name, u.dtype.name if u.dtype else None, [index[id(s)] for s in u.src], _enc_arg(u.arg)]
           for u in kernel.ops]
    return json.dumps({"format": FORMAT, "name": kernel.name, "global_size": kernel.global_size,
                       "local_size": kernel.local_size, "ops": ops}, separators=(",", ":"))


def loads(text: str | bytes) -> Kernel:
    """The validated kernel encoded by :func:`dumps`; raises :class:`~runtime_core.ir.IRError` for malformed text (bad
    JSON, wrong types, excessive nesting, an invalid kernel)."""
    try:
        doc = json.loads(text)
        if not isinstance(doc, dict):
            raise IRError(f"not a {FORMAT} document: the top level is a JSON {type(doc).__name__}, not an object")
        if doc.get("format") != FORMAT:
            raise IRError(f"not a {FORMAT} document (format={doc.get('format')!r})")
        ops: list[UOp] = []
        for name, dtype, src, arg in doc["ops"]:
            if any(not isinstance(s, int) or not 0 <= s < len(ops) for s in src):
                raise IRError(f"op {len(ops)} {name}: source index out of range {src}")
            dt = dtypes.from_name(dtype) if dtype else None
            ops.append(UOp(Ops[name], dt, tuple(ops[s] for s in src), _dec_arg(arg)))  # type: ignore[arg-type]
        kernel = Kernel(doc["name"], ops, tuple(doc["global_size"]), tuple(doc["local_size"]))
    except IRError:
        raise
    except (ValueError, KeyError, TypeError) as e:
        raise IRError(f"malformed IR document: {type(e).__name__}: {e}") from e
    except RecursionError:
        raise IRError("malformed IR document: nested too deeply") from None
    return validate(kernel)
