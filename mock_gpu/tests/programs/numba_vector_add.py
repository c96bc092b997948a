"""A numba-cuda program as its users write it: a @cuda.jit vector add on device arrays, checked against numpy.
(numba-cuda compiles the kernel with NVVM to LTO-IR and links it with nvJitLink; the emulator runs the PTX.)"""

import numpy as np
from numba import cuda


@cuda.jit
def vector_add(a, b, out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = a[i] + b[i]


def main() -> None:
    n = 5000
    rng = np.random.default_rng(7)
    a = rng.standard_normal(n).astype(np.float32)
    b = rng.standard_normal(n).astype(np.float32)
    d_a, d_b = cuda.to_device(a), cuda.to_device(b)
    d_out = cuda.device_array_like(a)
    vector_add[(n + 255) // 256, 256](d_a, d_b, d_out)
    cuda.synchronize()
    np.testing.assert_array_equal(d_out.copy_to_host(), a + b)
    print("PASS")


if __name__ == "__main__":
    main()
