"""Over REST, a sealed namespace answers its payloads to a server holding the key, shows
``{"$sealed": "<key id>"}`` and ``sealed`` errors to one without it, and refuses a payload
search with ``sealed_namespace`` naming the field."""

from __future__ import annotations

import asyncio
import base64
from pathlib import Path

from fastapi.testclient import TestClient

from duetime import AsyncApp
from duetime.api import ApiSettings, create_api
from duetime.config import Settings

K1 = f"k1:{base64.b64encode(b'1' * 32).decode()}"
PAYLOAD = {"email": "rest@example.com"}


def test_a_sealed_namespace_over_rest(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'sealed.db'}"
    sealed = Settings(database_url=url, seal_keys=K1)

    async def make() -> None:
        async with AsyncApp(settings=sealed) as app:
            await app.schedule("job", PAYLOAD, delay=3600, key="a")

    asyncio.run(make())
    with TestClient(create_api(ApiSettings(core=sealed, auth=False))) as client:
        shown = client.get("/v1/namespaces/default/timers/a")
        assert shown.status_code == 200, shown.text
        assert shown.json()["timer"]["payload"] == PAYLOAD
        refused = client.get("/v1/namespaces/default/timers", params={"payload": "email=x"})
        assert refused.status_code == 422, refused.text
        assert refused.json()["code"] == "sealed_namespace"
        assert refused.json()["field"] == "payload"
    keyless = Settings(database_url=url)
    with TestClient(create_api(ApiSettings(core=keyless, auth=False))) as client:
        shown = client.get("/v1/namespaces/default/timers/a")
        assert shown.json()["timer"]["payload"] == {"$sealed": "k1"}
