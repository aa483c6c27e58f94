"""``duetime keys rotate``: every stored value sealed again with the first key of the ring,
resumable from the id it printed; and what the CLI shows without the key."""

from __future__ import annotations

import base64
import sqlite3

from tests.acceptance.conftest import Cli

K1 = f"k1:{base64.b64encode(b'1' * 32).decode()}"
K2 = f"k2:{base64.b64encode(b'2' * 32).decode()}"


def stored_payloads(cli: Cli) -> list[str]:
    with sqlite3.connect(cli.db_path) as conn:
        return [row[0] for row in conn.execute("SELECT payload FROM timers ORDER BY id")]


def test_rotate_reseals_with_the_first_key_and_resumes(cli: Cli) -> None:
    old = {"DUETIME_SEAL_KEYS": K1}
    for n in range(3):
        payload = f'{{"email": "u{n}@example.com"}}'
        cli.ok(
            "schedule", "job", "--delay", "PT1H", "--key", f"k{n}", "--payload", payload, env=old
        )
    assert all('"dts1:k1:' in p and "example.com" not in p for p in stored_payloads(cli))

    both = {"DUETIME_SEAL_KEYS": f"{K2},{K1}"}
    first = cli("keys", "rotate", "--batch", "2", env=both)
    assert first.code == 0, first.stderr
    assert "resume with --after 2" in first.stdout
    again = cli.ok("keys", "rotate", "--after", "2", env=both)
    assert again == {"resealed": 0}  # the first run finished: nothing left
    assert all('"dts1:k2:' in p for p in stored_payloads(cli))

    new = {"DUETIME_SEAL_KEYS": K2}
    shown = cli.ok("show", "k1", env=new)["timer"]
    assert shown["payload"] == {"email": "u1@example.com"}
    assert cli.ok("show", "k1")["timer"]["payload"] == {"$sealed": "k2"}  # no ring: sealed


def test_rotate_without_keys_says_which_setting(cli: Cli) -> None:
    error = cli.fails("keys", "rotate", code=2)
    assert error["field"] == "seal_keys"
