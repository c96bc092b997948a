"""``python -m runtime_core``: list every registered backend and whether it opens (and why not)."""

from __future__ import annotations

import sys

from runtime_core.device import Device


def main() -> int:
    """Print one line per backend; exit 1 if none opens."""
    backends = sorted(Device.backends())
    if not backends:
        print("no backends registered (install runtime-backends)")
        return 1
    ok_any = False
    for name in backends:
        ok, why = Device.probe(name)
        ok_any |= ok
        print(f"{name:8s} {'available' if ok else 'unavailable: ' + why}")
    return 0 if ok_any else 1


if __name__ == "__main__":
    sys.exit(main())
