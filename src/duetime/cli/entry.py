"""The ``duetime`` console script: says which extra to install when the CLI's packages are absent.

A library-only install (``pip install duetime``) has no click or rich; the command then explains
itself instead of ending on a traceback.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Sequence

from duetime.support.extras import server_missing

CLI_PACKAGES = ("click", "rich")
"""What every command needs; their top-level modules are small, so checking costs little."""


def main(argv: Sequence[str] | None = None) -> int:
    try:
        for package in CLI_PACKAGES:  # rich is otherwise imported late, at the first table
            importlib.import_module(package)
        from duetime.cli.main import main as run
    except ImportError as exc:
        message = server_missing(exc, "the duetime command")
        if message is None:
            raise
        sys.stderr.write(f"duetime: {message}\n")
        return 2
    return run(argv)


if __name__ == "__main__":
    sys.exit(main())
