"""Sealed values' base64: pybase64's codec and binascii's write the same text and read each
other's, so a process with either opens what any other sealed."""

from __future__ import annotations

import binascii
import os

import pybase64
import pytest

from duetime.support import base64codec, keyring
from duetime.support.sealing import KeyRing, SealBroken, Sealing

K1 = "k1:" + binascii.b2a_base64(b"1" * 32, newline=False).decode()
CODECS = {
    "pybase64": (pybase64.b64encode, pybase64.b64decode),
    "binascii": (lambda data: binascii.b2a_base64(data, newline=False), binascii.a2b_base64),
}


def test_pybase64_is_the_codec_where_it_is_installed() -> None:
    assert base64codec.FAST
    assert base64codec.decode is pybase64.b64decode


@pytest.mark.parametrize("size", [0, 1, 2, 3, 44, 45, 46, 290, 1000])
def test_both_codecs_write_the_same_text_and_read_each_others(size: int) -> None:
    data = os.urandom(size)
    texts = {name: encode(data) for name, (encode, _) in CODECS.items()}
    assert texts["pybase64"] == texts["binascii"]
    for _, decode in CODECS.values():
        assert decode(texts["pybase64"].decode()) == data


@pytest.mark.parametrize("text", ["AAA", "AAAA!!A", "A===", "AAAA\u00e9AAA"])
@pytest.mark.parametrize("codec", CODECS)
def test_both_codecs_refuse_what_is_not_base64_with_a_value_error(codec: str, text: str) -> None:
    with pytest.raises(ValueError, match=r"padding|[Ii]nvalid|ASCII"):
        CODECS[codec][1](text)


@pytest.mark.parametrize("codec", CODECS)
def test_a_ring_on_either_codec_opens_what_the_other_sealed(
    codec: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    other = next(name for name in CODECS if name != codec)
    monkeypatch.setattr(keyring, "b64encode", CODECS[other][0])
    sealing = Sealing(KeyRing.parse(K1))
    stored = sealing.seal_payload("default", '{"a":1}')
    error = sealing.seal_error("boom")
    monkeypatch.setattr(keyring, "b64encode", CODECS[codec][0])
    monkeypatch.setattr(keyring, "b64decode", CODECS[codec][1])
    assert sealing.read_payload(stored, strict=True) == {"a": 1}
    assert sealing.open_text(error) == "boom"
    with pytest.raises(SealBroken, match="not base64"):
        sealing.read_payload('{"$sealed":"dts1:k1:AAA"}', strict=True)
