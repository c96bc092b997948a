"""Linked instructions -> pre-built closures (:class:`mock_gpu.ptx.ops.Op`), once at load time: ``dispatch`` picks
the family decoder (``alu``, ``data``, ``sync``), ``operands`` builds register readers and writers, ``modifiers``
lists what each opcode may carry."""
