"""Device runtime backends: CPU, PYTHON, CUDA, DISK, CLOUD (found through the `runtime_core.backends` entry points)."""
