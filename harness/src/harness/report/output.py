"""Writing the report files all-or-nothing: every file goes to a temporary name first, then all are renamed."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Mapping
from pathlib import Path

from harness.report.errors import ReportInputError


def write_reports(out_dir: str | Path, files: Mapping[str, str]) -> list[Path]:
    """Write ``files`` (file name -> UTF-8 text) into ``out_dir`` (created if needed) and return their paths.

    Every file is written to a temporary file in ``out_dir`` before any is renamed into place (``os.replace``), so a
    failure leaves earlier reports untouched; a target name taken by a directory is refused before anything is written.
    Raises ReportInputError naming the directory when it cannot be written.
    """
    directory = Path(out_dir)
    staged: list[tuple[str, Path]] = []
    # a target that is a directory (or other non-file) would fail its rename after earlier ones succeeded
    if blocked := [name for name in files if (directory / name).exists() and not (directory / name).is_file()]:
        raise ReportInputError(
            f"--out {str(out_dir)!r} holds {', '.join(blocked)} as a directory or other non-file; remove it or choose "
            "another --out"
        )
    try:
        directory.mkdir(parents=True, exist_ok=True)
        for name, text in files.items():
            handle, temp = tempfile.mkstemp(prefix=f".{name}.", dir=directory)
            staged.append((temp, directory / name))
            os.chmod(temp, 0o644)  # mkstemp creates 0600; reports are meant to be read by others (CI artifacts)
            with os.fdopen(handle, "w", encoding="utf-8") as stream:
                stream.write(text)
    except OSError as exc:
        for temp, _ in staged:
            Path(temp).unlink(missing_ok=True)
        raise ReportInputError(f"--out {str(out_dir)!r}: cannot write the reports there: {exc}") from None
    for index, (temp, final) in enumerate(staged):
        try:
            os.replace(temp, final)
        except OSError as exc:  # not foreseeable above (e.g. the directory changed meanwhile): say what was replaced
            for left, _ in staged[index:]:
                Path(left).unlink(missing_ok=True)
            done = ", ".join(str(path) for _, path in staged[:index]) or "none"
            raise ReportInputError(f"--out {str(out_dir)!r}: cannot replace {str(final)!r}: {exc}; replaced: {done}") from None
    return [final for _, final in staged]
