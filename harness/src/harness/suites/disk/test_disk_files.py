"""Files made by other tools, read through DISK views into every selected device and compared with the tools' own
readers: numpy ``.npy`` (np.load) and safetensors (the ``safetensors`` package, when installed)."""

from __future__ import annotations

import json
import struct

import numpy as np
import pytest

from runtime_backends.disk.formats import file_buffer, npy_tensor, safetensors_tensors
from runtime_core import Buffer, Device


@pytest.fixture(autouse=True)
def _fresh_disk_devices():
    with Device.restoring():
        yield


def _on_device(device: str, view: Buffer, shape: tuple[int, ...]) -> np.ndarray:
    return Buffer(device, view.size, view.dtype).allocate().copy_from(view).numpy().reshape(shape)


@pytest.mark.parametrize("shape, dtype", [((3, 4, 5), np.float32), ((700, 1000), np.float16), ((333,), np.int64),
                                          ((2, 2), np.bool_), ((1 << 19,), np.uint32)])
def test_npy_files_match_np_load(device, tmp_path, rng, shape, dtype):
    arr = (rng.standard_normal(shape) * 50).astype(dtype)
    path = tmp_path / "arr.npy"
    np.save(path, arr)
    base = file_buffer(path)
    tensor = npy_tensor(base)
    np.testing.assert_array_equal(_on_device(device, tensor.view(base), tensor.shape), np.load(path))
    base.deallocate()


def test_safetensors_files_match_the_safetensors_reader(device, tmp_path, rng):
    st = pytest.importorskip("safetensors.numpy",
                             reason="the safetensors package is the reference reader (nox -s tests-disk installs it)")
    tensors = {"embed": rng.standard_normal((512, 600)).astype(np.float32),
               "bias": rng.standard_normal(33).astype(np.float16),
               "ids": rng.integers(0, 1 << 40, (9, 7)).astype(np.int64), "mask": rng.integers(0, 2, 5).astype(bool)}
    path = tmp_path / "model.safetensors"
    st.save_file(tensors, str(path))
    reference = st.load_file(str(path))
    base = file_buffer(path)
    for name, tensor in safetensors_tensors(base).items():
        np.testing.assert_array_equal(_on_device(device, tensor.view(base), tensor.shape), reference[name])
    base.deallocate()


def test_json_header_files_with_byte_offsets_match_numpy(device, tmp_path, rng):
    """The same layout written without the safetensors package: tensors at odd byte offsets of the file."""
    a, b = rng.standard_normal(1001).astype(np.float32), rng.integers(0, 255, 3).astype(np.uint8)
    header = json.dumps({"b": {"dtype": "U8", "shape": [3], "data_offsets": [0, 3]},
                         "a": {"dtype": "F32", "shape": [7, 143], "data_offsets": [3, 4007]}}).encode()
    path = tmp_path / "odd.safetensors"
    path.write_bytes(struct.pack("<Q", len(header)) + header + b.tobytes() + a.tobytes())
    base = file_buffer(path)
    found = safetensors_tensors(base)
    assert found["a"].offset == 8 + len(header) + 3
    np.testing.assert_array_equal(_on_device(device, found["a"].view(base), (7, 143)), a.reshape(7, 143))
    np.testing.assert_array_equal(_on_device(device, found["b"].view(base), (3,)), b)
    base.deallocate()
