"""PYTHON backend: numpy interpreter of the kernel IR (the reference semantics)."""
