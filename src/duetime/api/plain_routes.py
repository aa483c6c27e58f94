"""Routes served by plain Starlette, outside FastAPI's request handling: the busiest one,
``POST /v1/namespaces/{ns}/timers``, a second time.

FastAPI solves every route's dependencies on each request, reading its query string, headers
and cookies whether the route declares any or not: on the busiest route that is a large share
of the server's CPU a request (``bench/api_bench.py --floor`` measures it against the minimal
FastAPI floor, with and without this route). This plain Starlette route comes first and runs
the same code
(:func:`~duetime.api.timers.put_timer`, :func:`~duetime.api.deps.writable_of`) with the same
answers and errors; it matches only a valid namespace (its path convertor is the namespace
pattern), so anything else falls through to the documented route, which FastAPI validates
(and which is what ``/openapi.json`` describes).
"""

from __future__ import annotations

from starlette.convertors import Convertor, register_url_convertor
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from duetime.api.deps import writable_of
from duetime.api.timers import put_timer
from duetime.formats import NAMESPACE_PATTERN


class NamespaceConvertor(Convertor[str]):
    """A path segment that is a valid namespace name (``formats.NAMESPACE_PATTERN``)."""

    regex = NAMESPACE_PATTERN.removeprefix("^").removesuffix("$")

    def convert(self, value: str) -> str:
        return value

    def to_string(self, value: str) -> str:
        return value


register_url_convertor("namespace", NamespaceConvertor())


async def create_timer(request: Request) -> Response:
    return await put_timer(request, await writable_of(request))


ROUTES = [
    Route(
        "/v1/namespaces/{namespace:namespace}/timers",
        create_timer,
        methods=["POST"],
        include_in_schema=False,
    )
]
"""Put first in the application's routes (:func:`duetime.api.app.create_app`)."""
