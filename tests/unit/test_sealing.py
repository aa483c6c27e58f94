"""The key ring: what it seals opens with any ring holding that key, and never otherwise."""

from __future__ import annotations

import base64

import pytest

from duetime.config import Settings
from duetime.errors import InvalidInput
from duetime.support import keyring
from duetime.support.jsontext import load_json
from duetime.support.sealing import KeyRing, SealBroken, Sealing, SealKeyMissing

K1 = base64.b64encode(b"1" * 32).decode()
K2 = base64.b64encode(b"2" * 32).decode()
SECRET = '{"email":"alice@example.com","token":"tok-123"}'


def test_the_first_key_seals_and_every_key_opens() -> None:
    old = KeyRing.parse(f"k1:{K1}")
    both = KeyRing.parse(f"k2:{K2}, k1:{K1}")
    token = old.seal(SECRET.encode(), b"payload")
    assert token.startswith("dts1:k1:")
    assert "alice" not in token
    assert both.open(token, b"payload") == SECRET.encode()
    assert both.seal(b"x", b"payload").startswith("dts1:k2:")


def test_a_missing_key_is_named() -> None:
    token = KeyRing.parse(f"k1:{K1}").seal(b"x", b"payload")
    with pytest.raises(SealKeyMissing, match="'k1'"):
        KeyRing.parse(f"k2:{K2}").open(token, b"payload")


def test_an_altered_or_misplaced_value_does_not_open() -> None:
    ring = KeyRing.parse(f"k1:{K1}")
    token = ring.seal(SECRET.encode(), b"payload")
    body = base64.b64decode(token.split(":", 2)[2])
    altered = bytes([*body[:-1], body[-1] ^ 1])
    with pytest.raises(SealBroken):
        ring.open("dts1:k1:" + base64.b64encode(altered).decode(), b"payload")
    with pytest.raises(SealBroken):  # a sealed error passed off as a payload
        ring.open(token, b"text")


def test_nonces_never_repeat_and_a_data_key_seals_at_most_its_bound(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(keyring, "SEALS_PER_DATA_KEY", 3)
    ring = KeyRing.parse(f"k1:{K1}")
    seen = set()
    salts = set()
    for _ in range(10):
        raw = base64.b64decode(ring.seal(b"x", b"payload").split(":", 2)[2])
        salt, nonce = raw[:16], raw[16:28]
        assert (salt, nonce) not in seen
        seen.add((salt, nonce))
        salts.add(salt)
    assert len(salts) == 4  # 3 + 3 + 3 + 1: a new data key after each three


@pytest.mark.parametrize(
    ("keys", "says"),
    [
        ("k1", "<id>:<base64"),
        ("k1:not base64!", "not base64"),
        (f"k1:{base64.b64encode(b'short').decode()}", "32 bytes"),
        (f"k1:{K1},k1:{K2}", "twice"),
        (f"bad id:{K1}", "key id"),
    ],
)
def test_bad_keys_are_refused_naming_the_setting(keys: str, says: str) -> None:
    with pytest.raises(InvalidInput, match=says) as caught:
        Settings.from_env({"DUETIME_SEAL_KEYS": keys})
    assert caught.value.field == "seal_keys"


def test_settings_seal_the_namespaces_named_and_never_show_the_keys() -> None:
    settings = Settings.from_env(
        {"DUETIME_SEAL_KEYS": f"k1:{K1}", "DUETIME_SEAL_NAMESPACES": "billing, crm"}
    )
    assert K1 not in repr(settings)
    found = settings.sealing()
    assert found.seals("billing")
    assert found.seals("crm")
    assert not found.seals("default")
    assert Settings.from_env({"DUETIME_SEAL_KEYS": f"k1:{K1}"}).sealing().seals("any")
    assert not Settings.from_env({}).sealing().enabled


def test_a_reader_without_the_key_sees_sealed_and_a_worker_is_refused() -> None:
    writer = Sealing(KeyRing.parse(f"k1:{K1}"))
    stored = writer.seal_payload("default", SECRET)
    error = writer.seal_error("KeyError: alice@example.com")
    assert "alice" not in stored
    assert "alice" not in (error or "")
    assert writer.open_payload(load_json(stored)) == load_json(SECRET)
    assert writer.open_text(error) == "KeyError: alice@example.com"
    reader = Sealing(KeyRing.parse(f"k2:{K2}"))
    assert reader.open_payload(load_json(stored)) == {"$sealed": "k1"}
    assert reader.open_text(error) == "sealed"
    with pytest.raises(SealKeyMissing, match="'k1'"):
        reader.open_payload(load_json(stored), strict=True)
    with pytest.raises(SealKeyMissing, match="'k1'"):
        Sealing().open_payload(load_json(stored), strict=True)
    assert Sealing().open_payload({"$sealed": "a user's own value"}) == {
        "$sealed": "a user's own value"
    }


def test_a_stored_text_reads_as_its_decoding_would() -> None:
    sealing = Sealing(KeyRing.parse(f"k1:{K1}"))
    stored = sealing.seal_payload("default", SECRET)
    as_jsonb = stored.replace('":"', '": "', 1)  # PostgreSQL's jsonb text of the same value
    for text in (stored, as_jsonb):
        assert sealing.read_payload(text) == load_json(SECRET)
    for text in ('{"$sealed":"dts1:x","b":"c"}', '{"$sealed": 1}', "null", SECRET):
        assert sealing.read_payload(text) == load_json(text)
    assert Sealing().read_payload(stored) == {"$sealed": "k1"}
    with pytest.raises(SealKeyMissing):
        Sealing().read_payload(as_jsonb, strict=True)


# Sealed with key K1 by an earlier release of the key ring: what is stored stays readable.
STORED_PAYLOAD = (
    '{"$sealed":"dts1:k1:F5erWMWcABdSKbG1wHmv7QAAAAAAAAAAAAAAAItKbQIIx/CgiSlsyarX3RA0ziLyi547k6'
    'JsixV4QdzAliYWd1CwFJNoZIREdKDxtgib0OhrddhuHodiV2Ut0w=="}'
)
STORED_ERROR = (
    "$sealed:dts1:k1:F5erWMWcABdSKbG1wHmv7QAAAAAAAAAAAAAAAQVPVNjKPrQEC/A4esy0SAihiAlI1uw+Ul+Rt+kJ"
    "KU/nS9vQHb19ucnSwAA="
)


def test_values_sealed_by_an_earlier_release_still_open() -> None:
    sealing = Sealing(KeyRing.parse(f"k1:{K1}"))
    assert sealing.read_payload(STORED_PAYLOAD, strict=True) == load_json(SECRET)
    as_jsonb = STORED_PAYLOAD.replace('":"', '": "', 1)
    assert sealing.read_payload(as_jsonb, strict=True) == load_json(SECRET)
    assert sealing.open_payload(load_json(STORED_PAYLOAD)) == load_json(SECRET)
    assert sealing.open_text(STORED_ERROR) == "KeyError: alice@example.com"


@pytest.mark.parametrize("body", ["", "AAAA", "A" * 36, "AAAA\u00e9AAA", "AAA"])
def test_a_value_cut_short_or_not_base64_is_broken_not_a_crash(body: str) -> None:
    sealing = Sealing(KeyRing.parse(f"k1:{K1}"))
    with pytest.raises(SealBroken, match="'k1'"):
        sealing.ring.open("dts1:k1:" + body, b"payload")  # type: ignore[union-attr]
    with pytest.raises(SealBroken):
        sealing.read_payload('{"$sealed":"dts1:k1:' + body + '"}', strict=True)
    assert sealing.read_payload('{"$sealed":"dts1:k1:' + body + '"}') == {"$sealed": "k1"}
    assert sealing.open_text("$sealed:dts1:k1:" + body) == "sealed"
