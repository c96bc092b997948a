"""CPU backend: C source compiled to an ELF relocatable object, linked in-process and run from executable memory.

Modules, in the order a kernel meets them: ``allocator`` (CPUAllocator: host memory, HostPointer handles), ``renderer``
(kernel IR -> C with ``runtime_backends.cstyle``; ``cexpr`` is the CPU's C dialect), ``compiler`` ($CC -> object),
``elf`` (in-process linker), ``execmem`` (executable mappings, host-function whitelist), ``program`` (CPUProgram),
``launch`` (argument blocks, serial or pooled runs), ``pool`` (the thread pool over group ranges), ``memcheck``
(CPU_MEMCHECK), ``device`` (CPUDevice, the entry point). ``abi`` is the calling convention the renderer and the
program share.
"""
