"""The implementation of :mod:`mock_gpu.runtime`, one module per part of the CUDA runtime API reference: ``state``
(the runtime's device and context per thread, the result convention), ``device`` (6.1 Device Management, 6.3
Error Handling, 6.27 Version), ``memory`` (6.9 Memory Management, 6.10 Stream Ordered Memory Allocator), ``stream``
(6.4 Stream Management, 6.5 Event Management), ``graph`` (6.30 Graph Management, stream capture)."""
