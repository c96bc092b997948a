"""CPU backend: C source compiled to an ELF relocatable object, linked in-process and run from executable memory.

Modules: ``renderer`` (kernel IR -> C), ``compiler`` ($CC -> object), ``elf`` (in-process linker), ``execmem``
(executable mappings, host-function whitelist), ``program`` (CPUProgram), ``device`` (CPUDevice, the entry point).
"""
