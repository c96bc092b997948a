"""CUDA backend: CUDA C (NVRTC) or PTX kernels run through the CUDA driver API on NVIDIA GPUs, or on the emulated GPU
of ``mock_gpu`` with ``MOCKGPU=1``.

Modules: ``driver`` (the driver module, result checking), ``device`` (CUDADevice, the entry point), ``limits``
(device attributes), ``allocator`` and ``staging`` (memory and copies), ``compiler`` (NVRTC, PTX stamping),
``renderer_c`` (kernel IR -> CUDA C with ``runtime_backends.cstyle``) and ``renderer_ptx`` with ``ptx_alu``/``ptx_math``
(kernel IR -> PTX), ``layout`` (what both renderers share), ``ptx_info`` (kernel signatures from PTX), ``program``
(CUDAProgram), ``graph`` (CUDAGraph).
"""
