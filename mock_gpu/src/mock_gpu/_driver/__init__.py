"""The implementation of :mod:`mock_gpu.driver`, one module per concept of the CUDA driver API reference.

``init`` (6.2-6.4 errors, initialization, version), ``device`` (6.5), ``context`` (6.7, 6.8, 6.31 peer access),
``memory`` (6.13), ``module`` (6.10), ``launch`` (6.22 execution control), ``stream`` (6.18), ``event`` (6.19),
``graph`` (6.24); ``handles`` holds the objects behind the opaque handles, ``marshal`` converts cuda-python's
argument forms, ``results`` the CUresult errors and their reports, ``system`` the process's emulated system and the
``(CUresult, *outputs)`` convention. Section numbers are those of the CUDA 12.x/13.x driver API reference.
"""
