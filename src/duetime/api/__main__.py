"""``python -m duetime.api serve|tokens …``: the service commands, also before the CLI lists them.

Runs the ``duetime`` command group with ``serve`` and ``tokens`` added when it lacks them, so
``python -m duetime.api serve --port 8080`` is exactly ``duetime serve --port 8080``.
"""

from __future__ import annotations

import sys

from duetime.cli import main as cli_main
from duetime.cli.serve import serve
from duetime.cli.tokens import tokens


def main() -> int:
    for command in (serve, tokens):
        if command.name not in cli_main.cli.commands:
            cli_main.cli.add_command(command)
    return cli_main.main()


if __name__ == "__main__":
    sys.exit(main())
