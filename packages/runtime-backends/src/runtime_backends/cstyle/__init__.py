"""The C-family renderers' shared part: one writer and one set of value expressions, parameterized by a dialect.

Modules: ``values`` (types, constants, casts, ALU ops and the helpers they call, per :class:`~.values.Dialect`),
``writer`` (:class:`~.writer.CWriter`: one C statement per op), ``constants`` (exact bit patterns of constants, also
used by the PTX renderer). The CPU renderer (``runtime_backends.cpu.renderer``) and the CUDA C renderer
(``runtime_backends.cuda.renderer_c``) each define a dialect and override thread ids, loads/stores, bounds checks,
local memory and the function around the body.
"""
