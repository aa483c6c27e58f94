"""``duetime keys rotate``: seal every stored value with the first key of the ring."""

from __future__ import annotations

import click

from duetime.cli import output
from duetime.cli.context import common_options, config
from duetime.support import eventloop


@click.group()
def keys() -> None:
    """The key ring that seals values at rest (DUETIME_SEAL_KEYS; see docs/security.md)."""


@keys.command()
@click.option("--batch", default=500, show_default=True, help="Timers re-sealed a transaction.")
@click.option("--after", default=0, show_default=True, help="Resume after this timer id.")
@common_options
def rotate(batch: int, after: int) -> None:
    """Re-seal pending and retained timers, their errors and tracebacks, with the first key.

    Safe while workers run; stopped anywhere, run it again with --after set to the last id it
    printed. Once it ends, keys other than the first may leave DUETIME_SEAL_KEYS.
    """
    cfg = config()
    console = output.stderr() if cfg.json else output.stdout()

    def progress(changed: int, last: int) -> None:
        console.print(f"re-sealed {changed} timers so far; resume with --after {last}")

    async def main() -> int:
        app = cfg.app()
        try:
            return await app.rotate_keys(after=after, batch=batch, progress=progress)
        finally:
            await app.close()

    changed = eventloop.run(main())
    if cfg.json:
        output.emit_json({"resealed": changed})
        return
    output.stdout().print(f"re-sealed {changed} timers with the first key")
