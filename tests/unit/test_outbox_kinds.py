"""``transaction=`` recognises what it is given without importing SQLAlchemy or Django: duetime
needs neither, and a process that does not use them must not load them."""

from __future__ import annotations

import subprocess
import sys

PROBE = """
import asyncio, sqlite3, sys
from duetime.errors import InvalidInput
from duetime.app.outbox import held_async, held_blocking

for wrong in (object(), "x", 42):
    for resolve in (held_blocking, lambda t: asyncio.run(held_async(t))):
        try:
            resolve(wrong)
        except InvalidInput as exc:
            assert exc.field == "transaction", exc
        else:
            raise AssertionError(f"{wrong!r} was taken")
conn = sqlite3.connect(":memory:")
assert held_blocking(conn).connection is conn
loaded = sorted(m for m in sys.modules if m.split(".")[0] in ("sqlalchemy", "django"))
print(loaded)
"""


def test_recognising_a_transaction_imports_neither_sqlalchemy_nor_django() -> None:
    done = subprocess.run(
        [sys.executable, "-c", PROBE], capture_output=True, text=True, check=False, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"
