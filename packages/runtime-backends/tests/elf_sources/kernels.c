/* Kernels exercising the loader: each function needs one kind of section or relocation (see test_elf_x86_64.py). */
extern float exp2f(float);
extern double log2(double);

int global_counter;                                  /* global in -fPIC: accessed through the GOT (GOTPCREL[X]) */
static int data_table[8] = {3, 1, 4, 1, 5, 9, 2, 6}; /* .data */
static float zeroed[256];                            /* .bss */
static int ptr_a = 100, ptr_b = 200;
static int *const pointers[3] = {&ptr_a, &ptr_b, &global_counter}; /* .data.rel.ro: R_X86_64_64 / R_AARCH64_ABS64 */

/* a dense switch with distinct bodies: jump table in .rodata */
int jump(int k, int x) {
  switch (k) {
  case 0: return x * 3 + 1;
  case 1: return x ^ 0x55;
  case 2: return (x << 3) - 7;
  case 3: return x / 5 + 11;
  case 4: return x % 7 - 2;
  case 5: return ~x + 100;
  case 6: return x * x - 9;
  case 7: return (x >> 2) | 0x40;
  case 8: return x + 12345;
  default: return -1;
  }
}

/* float and double literals: constant pools (.rodata.cst4 / .rodata.cst8) */
float poly_f(float x) { return x * 1.2345f + 3.5f; }
double poly_d(double x) { return x * 0.123456789 - 2.75; }

int table_at(int i) { return data_table[i & 7]; }
int table_bump(int i, int d) { data_table[i & 7] += d; return data_table[i & 7]; }

float bss_add(int i, float v) { zeroed[i & 255] += v; return zeroed[i & 255]; }

int counter_add(int d) { global_counter += d; return global_counter; }

int deref(int i) { return *pointers[i]; }

/* calls between functions: R_X86_64_PLT32 / R_AARCH64_CALL26 */
__attribute__((noinline)) int helper(int x) { return x * 7 + 2; }
int caller(int x) { return helper(x) + helper(x + 1); }

/* libm calls, resolved through the loader's whitelist */
float call_exp2f(float x) { return exp2f(x) * 2.0f; }
double call_log2(double x) { return log2(x) + 1.0; }

/* an elementwise loop over buffers, like a rendered kernel */
void saxpy(float *restrict out, const float *restrict a, const float *restrict b, float alpha, int n) {
  for (int i = 0; i < n; i++) out[i] = alpha * a[i] + b[i];
}
