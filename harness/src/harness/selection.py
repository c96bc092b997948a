"""Which backends a session runs on: requested or default, probed once, the same list on every xdist worker."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest

from harness import options
from runtime_core.device import Device, DeviceError, default_order

__all__ = ["BackendSelection", "select_backends", "get_selection", "WORKERINPUT_KEY"]

WORKERINPUT_KEY = "harness_backend_selection"
_STASH_KEY = pytest.StashKey["BackendSelection"]()


@dataclass(frozen=True)
class BackendSelection:
    """The outcome of backend selection.

    Attributes:
        params: the ``device`` fixture's parameters in order: the usable backends, plus requested backends that are
            unavailable (their tests skip with the reason).
        used: the backends that opened.
        unavailable: ``(name, reason)`` of each requested or default candidate that did not open.
        explicit: whether the list came from ``--backends``/``HARNESS_BACKENDS`` rather than the defaults.
    """

    params: tuple[str, ...]
    used: tuple[str, ...]
    unavailable: tuple[tuple[str, str], ...]
    explicit: bool

    def reason(self, name: str) -> str | None:
        """Why ``name`` is unavailable, or ``None`` if it is usable."""
        return dict(self.unavailable).get(name)

    def header(self) -> str:
        """One report-header line listing the backends used and the unavailable ones with their reasons."""
        source = "requested" if self.explicit else "default"
        used = ", ".join(self.used) or "none"
        line = f"harness backends ({source}): {used}"
        if self.unavailable:
            line += "; unavailable: " + "; ".join(f"{n} ({why})" for n, why in self.unavailable)
        return line

    def to_dict(self) -> dict[str, Any]:
        """Plain lists and strings, to cross the xdist channel to the workers."""
        return {"params": list(self.params), "used": list(self.used),
                "unavailable": [list(u) for u in self.unavailable], "explicit": self.explicit}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> BackendSelection:
        return cls(tuple(d["params"]), tuple(d["used"]), tuple((n, r) for n, r in d["unavailable"]), bool(d["explicit"]))


def _canonical(names: list[str]) -> list[str]:
    out: list[str] = []
    for n in names:
        try:
            c = Device.canonicalize(n)
        except DeviceError:
            c = n
        if c not in out:
            out.append(c)
    return out


def select_backends(requested: list[str] | None) -> BackendSelection:
    """Probe ``requested`` (or the default candidates) with ``Device.probe`` and return the selection.

    The order is deterministic: requested order, or ``runtime_core.device.default_order()`` for defaults.
    """
    if requested is None:
        order = default_order()
        names, unavailable = order.names, list(order.broken)
    else:
        names, unavailable = _canonical(requested), []
    used = []
    for name in names:
        ok, why = Device.probe(name)
        if ok:
            used.append(name)
        else:
            unavailable.append((name, why))
    params = tuple(names) if requested is not None else tuple(used)
    return BackendSelection(params, tuple(used), tuple(unavailable), requested is not None)


def get_selection(config: pytest.Config) -> BackendSelection:
    """The session's selection, computed on first use (never at import); xdist workers take the controller's."""
    if (sel := config.stash.get(_STASH_KEY, None)) is not None:
        return sel
    workerinput = getattr(config, "workerinput", None)
    if workerinput is not None and WORKERINPUT_KEY in workerinput:
        sel = BackendSelection.from_dict(workerinput[WORKERINPUT_KEY])
    else:
        sel = select_backends(options.requested_backends(config))
    config.stash[_STASH_KEY] = sel
    return sel
