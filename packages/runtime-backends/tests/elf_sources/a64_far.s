// ADRP to an external symbol: overflows R_AARCH64_ADR_PREL_PG_HI21 when the symbol is more than 4 GiB away.
        .text
        .globl  start
start:
        adrp    x0, ext_data
        add     x0, x0, :lo12:ext_data
        ret
