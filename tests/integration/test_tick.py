"""``tick``: fire what is due once and exit, leaving nothing half-recorded."""

from __future__ import annotations

import asyncio

from duetime import AsyncApp, Dead, Event, FrozenClock, Status


def test_tick_records_every_outcome_before_returning(db_url: str, clock: FrozenClock) -> None:
    async def main() -> None:
        app = AsyncApp(db_url, clock=clock)
        ran: list[str] = []

        @app.handler("ping")
        async def ping(event: Event) -> None:
            ran.append(event.key)

        @app.handler("doomed")
        def doomed(event: Event) -> None:
            raise Dead("no such customer")

        async with app:
            await app.schedule("ping", delay=0, key="now")
            await app.schedule("doomed", delay=0, key="bad")
            await app.schedule("ping", delay=60, key="later")
            stats = await app.tick()
            assert stats.outcomes == {"done": 1, "dead": 1}
            assert ran == ["now"]
            assert (await app.get("now")).status is Status.DONE
            dead = await app.get("bad")
            assert dead.status is Status.DEAD
            assert dead.last_error == "no such customer"
            assert (await app.get("later")).status is Status.SCHEDULED
            clock.advance(61)
            stats = await app.tick()
            assert stats.outcomes == {"done": 1}
            assert (await app.get("later")).status is Status.DONE

    asyncio.run(main())
