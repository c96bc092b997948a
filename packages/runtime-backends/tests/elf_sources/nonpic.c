/* Built with -fno-pic -mcmodel=small: absolute 32-bit addresses (R_X86_64_32 for `mov $sym`, R_X86_64_32S for
   `table(,%rax,4)`). The image must then live below 2 GiB / 4 GiB. */
int table[4] = {10, 20, 30, 40};
int *address_of_table(void) { return table; }
int load(long i) { return table[i]; }
