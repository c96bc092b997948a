import pytest

from runtime_core import Buffer, BufferSpec, Device, DeviceError, dtypes


def test_canonical_names():
    assert Device.canonicalize("cpu") == "CPU"
    assert Device.canonicalize("cuda:0") == "CUDA"
    assert Device.canonicalize("cuda:1") == "CUDA:1"
    assert Device.canonicalize("disk:/tmp/MyFile") == "DISK:/tmp/MyFile"


def test_unknown_device_lists_registered_backends():
    with pytest.raises(DeviceError, match="unknown device 'NOPE'.*PYTHON"):
        Device["NOPE"]


def test_failed_open_names_the_reason():
    with pytest.raises(DeviceError, match="PYTHON:3 failed to open.*single device"):
        Device["PYTHON:3"]
    ok, why = Device.probe("PYTHON:3")
    assert not ok and "single device" in why


def test_default_from_env(monkeypatch):
    monkeypatch.setenv("PYTHON", "1")
    assert Device.DEFAULT == "PYTHON"


def test_two_defaults_requested_is_an_error(monkeypatch):
    monkeypatch.setenv("PYTHON", "1")
    monkeypatch.setenv("CPU", "1")
    with pytest.raises(DeviceError, match="several default devices"):
        _ = Device.DEFAULT


def test_buffer_lifecycle_errors_on_python_device():
    b = Buffer("python", 4, dtypes.int32)
    with pytest.raises(RuntimeError, match="not allocated"):
        b.copyin(bytes(16))
    b.allocate()
    with pytest.raises(ValueError, match="16 bytes.*12 bytes"):
        b.copyin(bytes(12))
    b.copyin(bytes(range(16)))
    assert bytes(b.as_buffer()) == bytes(range(16))
    v = b.view(2, dtypes.int16, 4)
    assert list(v.numpy()) == [0x0504, 0x0706]
    with pytest.raises(ValueError, match="does not fit"):
        b.view(4, dtypes.int32, 4)
    b.deallocate()
    with pytest.raises(RuntimeError, match="deallocated"):
        b.copyout(bytearray(16))
    with pytest.raises(RuntimeError, match="deallocated"):
        v.numpy()


@pytest.mark.parametrize("size", [0, -3, 2.0])
def test_buffer_rejects_bad_sizes(size):
    with pytest.raises(ValueError, match="buffer size must be a positive int number of elements"):
        Buffer("PYTHON", size, dtypes.float32)


def test_buffer_spec_is_hashable_and_frozen():
    assert hash(BufferSpec()) == hash(BufferSpec())
    with pytest.raises(AttributeError, match="cannot assign to field 'host'"):
        BufferSpec().host = True  # type: ignore[misc]
