"""A shop's own FastAPI application that reminds customers of unpaid orders through duetime.

``POST /orders`` stores the order and schedules its reminder in the same request; the handler
below runs in this process when it is due; duetime's REST API and dashboard are mounted at
``/duetime``. Run it: ``.venv/bin/uvicorn examples.fastapi_app.app:app`` (see the README).
"""

from __future__ import annotations

import os
from datetime import datetime

from fastapi import FastAPI, HTTPException
from pydantic import BaseModel, Field

import duetime
from duetime.api import mount

DATABASE_URL = os.environ.get("DUETIME_DATABASE_URL", "sqlite:///fastapi_app.db")
REMINDER = "order.payment-reminder"

scheduler = duetime.AsyncApp(DATABASE_URL)
reminded: dict[str, datetime] = {}
"""Order id -> when its reminder went out (a real shop would send an email and store this)."""


@scheduler.handler(REMINDER)
async def send_payment_reminder(event: duetime.Event) -> None:
    order = str(event.payload["order_id"])  # type: ignore[index,call-overload]
    print(f"reminding {event.subject} to pay order {order}", flush=True)
    reminded[order] = event.fired_at or event.due_at


class Order(BaseModel):
    order_id: str = Field(pattern=r"^[A-Za-z0-9_-]{1,64}$")
    email: str
    remind_in: str = Field("P1D", description="ISO 8601 duration, e.g. PT30S or P1D")


app = FastAPI(title="shop")


@app.post("/orders", status_code=201)
async def place_order(order: Order) -> dict[str, object]:
    """Take the order and schedule its payment reminder: one timer per order (its key), so
    placing the same order again moves the reminder instead of adding a second one."""
    try:
        result = await scheduler.schedule(
            REMINDER,
            {"order_id": order.order_id},
            delay=order.remind_in,
            key=reminder_key(order.order_id),
            subject=order.email,
        )
    except duetime.InvalidInput as exc:  # e.g. remind_in="soon": say which field is wrong
        raise HTTPException(422, {"field": "remind_in", "message": exc.message}) from None
    return {"order_id": order.order_id, "reminder_due_at": result.timer.due_at.isoformat()}


@app.get("/orders/{order_id}")
async def order_status(order_id: str) -> dict[str, object]:
    try:
        timer = await scheduler.get(reminder_key(order_id))
    except duetime.NotFound:
        raise HTTPException(404, f"no order {order_id!r}") from None
    sent = reminded.get(order_id)
    return {
        "order_id": order_id,
        "reminder": timer.status.value,
        "reminded_at": None if sent is None else sent.isoformat(),
    }


@app.delete("/orders/{order_id}/reminder")
async def paid(order_id: str) -> dict[str, object]:
    """The customer paid: cancel the reminder (409 once it has gone out)."""
    try:
        timer = await scheduler.cancel(reminder_key(order_id))
    except duetime.NotFound:
        raise HTTPException(404, f"no order {order_id!r}") from None
    except duetime.Conflict as exc:
        raise HTTPException(409, exc.message) from None
    return {"order_id": order_id, "reminder": timer.status.value}


def reminder_key(order_id: str) -> str:
    return f"order:{order_id}:payment-reminder"


# duetime's API and dashboard at /duetime, started and stopped with this app; worker=True runs
# send_payment_reminder here (with worker=False, run `duetime worker --app ...` elsewhere).
mount(app, "/duetime", app=scheduler, worker=True)
