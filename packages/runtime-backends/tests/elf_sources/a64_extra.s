// AArch64 relocations that C code rarely needs, each against a label in another section or an external symbol.
        .text
        .globl  start
start:
        b.eq    far_label                 // R_AARCH64_CONDBR19
        tbz     x0, #3, far_label         // R_AARCH64_TSTBR14
        adr     x1, far_label             // R_AARCH64_ADR_PREL_LO21
        adrp    x2, bytes                 // R_AARCH64_ADR_PREL_PG_HI21_NC below uses the same page
        ldrb    w3, [x2, :lo12:bytes]     // R_AARCH64_LDST8_ABS_LO12_NC
        adrp    x2, :pg_hi21_nc:halves    // R_AARCH64_ADR_PREL_PG_HI21_NC
        ldrh    w3, [x2, :lo12:halves]    // R_AARCH64_LDST16_ABS_LO12_NC
        adrp    x2, quads
        ldr     q0, [x2, :lo12:quads]     // R_AARCH64_LDST128_ABS_LO12_NC
        b       ext_func                  // R_AARCH64_JUMP26 to an external symbol
        .section .text.far, "ax"
far_label:
        ret
        .section .rodata
bytes:  .byte   1, 2, 3, 4
        .balign 2
halves: .hword  5, 6
        .balign 16
quads:  .quad   7, 8
        .word   far_label - .             // R_AARCH64_PREL32
        .word   far_label + 8             // R_AARCH64_ABS32
        .quad   far_label - .             // R_AARCH64_PREL64
        .quad   ext_data + 24             // R_AARCH64_ABS64 against an external symbol
