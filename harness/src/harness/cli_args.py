"""The argument parser of the ``python -m harness`` commands: usage errors are one line on stderr, exit status 2."""

from __future__ import annotations

import argparse
from typing import NoReturn

__all__ = ["ArgumentParser"]


class ArgumentParser(argparse.ArgumentParser):
    """``argparse.ArgumentParser`` whose ``error`` prints ``<prog>: error: <message>; see <prog> --help`` as one line
    (argparse's default prints the whole usage first) and exits with status 2, as every harness command does for
    unusable input."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message}; see {self.prog} --help\n")
