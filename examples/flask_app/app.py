"""A Flask (WSGI) application that schedules a welcome message in its request handler.

Flask's views are blocking code, so this uses :class:`duetime.App`, the blocking facade: each
call runs to completion on duetime's own event-loop thread. The worker runs beside it, in
``duetime serve`` (API, dashboard and worker) or ``duetime worker`` — see the README.
"""

from __future__ import annotations

import os

from flask import Flask, abort, jsonify, request
from flask.typing import ResponseReturnValue

import duetime

DATABASE_URL = os.environ.get("DUETIME_DATABASE_URL", "sqlite:///flask_app.db")
WELCOME = "signup.welcome"

scheduler = duetime.App(DATABASE_URL)


@scheduler.handler(WELCOME)
def send_welcome(event: duetime.Event) -> None:
    """Runs in the worker's process (a real app would send an email here)."""
    print(f"welcome, {event.payload['name']}!", flush=True)  # type: ignore[index,call-overload]


app = Flask(__name__)


@app.post("/signups")
def sign_up() -> ResponseReturnValue:
    """Register the user and schedule their welcome; one per user (the key), so signing up
    twice moves it rather than sending two."""
    body = request.get_json(silent=True) or {}
    user, name = body.get("user"), body.get("name", body.get("user"))
    if not isinstance(user, str) or not user:
        return jsonify(field="user", message="send the user's id"), 422
    try:
        result = scheduler.schedule(
            WELCOME,
            {"name": name},
            delay=body.get("welcome_in", "PT1H"),
            key=welcome_key(user),
            subject=user,
        )
    except duetime.InvalidInput as exc:
        return jsonify(field="welcome_in", message=exc.message), 422
    return jsonify(user=user, welcome_due_at=result.timer.due_at.isoformat()), 201


@app.get("/signups/<user>")
def signup_status(user: str) -> ResponseReturnValue:
    try:
        timer = scheduler.get(welcome_key(user))
    except duetime.NotFound:
        abort(404)
    return jsonify(user=user, welcome=timer.status.value)


@app.delete("/signups/<user>")
def cancel_signup(user: str) -> ResponseReturnValue:
    """The user left before the welcome went out: cancel it (409 once it has)."""
    try:
        timer = scheduler.cancel(welcome_key(user))
    except duetime.NotFound:
        abort(404)
    except duetime.Conflict as exc:
        return jsonify(message=exc.message), 409
    return jsonify(user=user, welcome=timer.status.value)


def welcome_key(user: str) -> str:
    return f"welcome:{user}"
