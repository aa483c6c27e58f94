"""CPU cost of sealing and opening one typical payload (about 200 bytes of JSON), per timer.

A sealed timer is sealed once when stored and opened once when claimed; this measures both
together in one thread, as the store and the claim do them: ``Sealing.seal_payload`` on the
JSON text, and reading the stored text back (``Sealing.read_payload``), against decoding the
plain text, which a claim does either way. The first line says which base64 codec served
(pybase64 with ``duetime[fast-sealing]``, else binascii).

    python bench/seal_bench.py [--rounds 200000]
"""

from __future__ import annotations

import argparse
import base64
import time

from duetime.support.base64codec import FAST
from duetime.support.jsontext import json_text, load_json
from duetime.support.sealing import KeyRing, Sealing

PAYLOAD = {
    "email": "alice.example@example.com",
    "token": "tok_9f8e7d6c5b4a39281706f5e4d3c2b1a0",
    "customer_id": 1234567,
    "plan": "pro-annual",
    "items": [{"sku": "A-100", "qty": 2}, {"sku": "B-220", "qty": 1}],
    "locale": "en-GB",
    "note": "renewal reminder, second notice",
}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=200_000)
    rounds = parser.parse_args().rounds
    sealing = Sealing(KeyRing.parse(f"k1:{base64.b64encode(bytes(32)).decode()}"))
    text = json_text(PAYLOAD)
    stored = sealing.seal_payload("default", text)
    assert sealing.read_payload(stored) == PAYLOAD
    seal, read = sealing.seal_payload, sealing.read_payload

    start = time.process_time()
    for _ in range(rounds):
        seal("default", text)
    sealed = (time.process_time() - start) / rounds
    start = time.process_time()
    for _ in range(rounds):
        read(stored)
    opened = (time.process_time() - start) / rounds
    start = time.process_time()
    for _ in range(rounds):
        load_json(text)
    plain = (time.process_time() - start) / rounds
    codec = "pybase64" if FAST else "binascii (no pybase64)"
    print(f"payload {len(text)} bytes of JSON, {rounds} rounds, CPU time, base64 by {codec}")
    print(f"seal            {sealed * 1e6:6.2f} µs")
    print(f"read sealed     {opened * 1e6:6.2f} µs  (reading the plain text {plain * 1e6:.2f} µs)")
    print(f"per timer       {(sealed + opened - plain) * 1e6:6.2f} µs added")


if __name__ == "__main__":
    main()
