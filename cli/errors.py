"""The one error a command raises to end with a line on stderr and exit code 1."""

from __future__ import annotations


class CliError(Exception):
    """Printed as one line on stderr, exit code 1."""
