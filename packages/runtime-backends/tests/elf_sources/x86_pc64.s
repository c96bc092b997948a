# R_X86_64_PC64 (S + A - P, 64 bit) and R_X86_64_64 against a local and an external symbol.
        .text
        .globl  target
target: ret
        .data
        .globl  rel64
rel64:  .quad   target - .
        .quad   ext_data + 16
        .quad   ext_data - .
