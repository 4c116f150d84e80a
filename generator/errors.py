"""One error type for every bad input, so the CLI can print where it is and exit 1."""

from __future__ import annotations


class GeneratorError(ValueError):
    """Bad input or data: `where` names the file, line or key path at fault."""

    def __init__(self, where: str, message: str):
        self.where = where
        self.message = message
        super().__init__(f"{where}: {message}" if where else message)


class UsageError(GeneratorError):
    """Bad command-line usage (exit 2), such as a malformed --set."""
