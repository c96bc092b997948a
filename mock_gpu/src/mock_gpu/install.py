"""Putting the emulator where a cuda-python program looks for CUDA, so that it runs unmodified without a GPU.

:func:`install` makes ``cuda.bindings.driver`` and the legacy ``cuda.cuda`` resolve to :mod:`mock_gpu.driver`,
``cuda.bindings.runtime`` and ``cuda.cudart`` to :mod:`mock_gpu.runtime`, ``cuda.bindings.nvrtc`` and
``cuda.nvrtc`` to :mod:`mock_gpu.nvrtc` (the real NVRTC, registering the cubins it makes), and
``cuda.bindings.nvjitlink`` to :mod:`mock_gpu.nvjitlink` (the real nvJitLink, registering the cubins it links). It
replaces the entries in ``sys.modules`` and the attributes of the ``cuda`` and ``cuda.bindings`` packages, so
``import cuda.bindings.driver``, ``from cuda.bindings import driver`` and ``from cuda import cuda, cudart`` all find
the mock. Modules that already imported the real ones keep them: install first (a conftest, or ``python -m mock_gpu
run``). :func:`uninstall` restores what was there.

numba-cuda (0.18) makes every driver call through ``cuda.bindings.driver`` but first checks that a CUDA driver
library can be opened with ctypes; it uses nothing of it unless ``NUMBA_CUDA_USE_NVIDIA_BINDING=0``. Unless that or
``NUMBA_CUDA_DRIVER`` is set, :func:`install` sets ``NUMBA_CUDA_DRIVER`` to cuda-python's own driver-layer extension
(``cuda.bindings.cydriver``), which opens anywhere, so that the check passes; numba reads it when it is imported.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
import types

from .config import clear_numba_cuda_driver, set_numba_cuda_driver

__all__ = ["install", "installed", "uninstall"]

_saved: dict[str, tuple[types.ModuleType | None, object]] | None = None
_set_numba_driver = False


def _targets() -> dict[str, types.ModuleType]:
    from . import driver, nvjitlink, nvrtc, runtime

    return {"cuda.bindings.driver": driver, "cuda.cuda": driver, "cuda.bindings.runtime": runtime,
            "cuda.cudart": runtime, "cuda.bindings.nvrtc": nvrtc, "cuda.nvrtc": nvrtc,
            "cuda.bindings.nvjitlink": nvjitlink}


def install() -> None:
    """Make the cuda-python module names resolve to the emulator (see the module docstring); idempotent."""
    global _saved
    if _saved is not None:
        return
    targets = _targets()  # imports the real modules the mock builds on, before they are replaced
    saved: dict[str, tuple[types.ModuleType | None, object]] = {}
    for name, module in targets.items():
        parent_name, _, leaf = name.rpartition(".")
        parent = importlib.import_module(parent_name)
        saved[name] = (sys.modules.get(name), getattr(parent, leaf, None))
        sys.modules[name] = module
        setattr(parent, leaf, module)
    _saved = saved
    _point_numba_at_a_driver_library()


def _point_numba_at_a_driver_library() -> None:
    global _set_numba_driver
    spec = importlib.util.find_spec("cuda.bindings.cydriver")
    if spec is not None and spec.origin:
        _set_numba_driver = set_numba_cuda_driver(spec.origin)


def uninstall() -> None:
    """Undo :func:`install`: the real cuda-python modules are found again; no effect if not installed."""
    global _saved, _set_numba_driver
    if _saved is None:
        return
    if _set_numba_driver:
        clear_numba_cuda_driver()
        _set_numba_driver = False
    for name, (module, attribute) in _saved.items():
        parent_name, _, leaf = name.rpartition(".")
        parent = sys.modules[parent_name]
        if module is None:
            sys.modules.pop(name, None)
        else:
            sys.modules[name] = module
        if attribute is None:
            if hasattr(parent, leaf):
                delattr(parent, leaf)
        else:
            setattr(parent, leaf, attribute)
    _saved = None


def installed() -> bool:
    """Whether :func:`install` is in effect."""
    return _saved is not None
