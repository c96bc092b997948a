"""Paired benchmark runs: long-lived pytest workers timed in alternating rounds by a controller (this package)."""
