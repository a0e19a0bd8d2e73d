"""A small local server implementing three operations of the OpenAPI Initiative's Petstore
(tests/support/openapi/petstore.yaml), serving that document too; it records what it was sent."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from aiohttp import web

PETSTORE = Path(__file__).parent / "openapi" / "petstore.yaml"
PETS = [{"id": 1, "name": "Rex", "tag": "dog"}, {"id": 2, "name": "Tom", "tag": "cat"},
        {"id": 3, "name": "Nemo"}]


@dataclass
class Petstore:
    base_url: str = ""
    document: str = field(default_factory=PETSTORE.read_text)
    seen: list[dict[str, Any]] = field(default_factory=list)  # method, path, query, headers
    answer_status: int | None = None  # when set, every operation answers it
    # When set, every operation misbehaves: "slow" (answers once `released` is set), "redirect"
    # (to /v1/pets/1), "big" (3 MiB of JSON), "echo" (a 400 repeating the request's headers).
    mode: str | None = None
    released: asyncio.Event = field(default_factory=asyncio.Event)
    waiting: int = 0  # "slow" requests arrived and not yet released
    created: list[Any] = field(default_factory=list)  # the JSON bodies POST /v1/pets received

    def app(self) -> web.Application:
        app = web.Application()

        def record(request: web.Request) -> web.Response | None:
            self.seen.append({"method": request.method, "path": request.raw_path,
                              "query": dict(request.query), "headers": dict(request.headers)})
            if self.answer_status is not None:
                return web.json_response({"code": self.answer_status, "message": "no"},
                                         status=self.answer_status)
            if self.mode == "redirect":
                return web.Response(status=302, headers={"Location": "/v1/pets/1"})
            if self.mode == "big":
                return web.json_response([{"id": i, "name": "x" * 1000} for i in range(3000)])
            if self.mode == "echo":
                return web.json_response({"code": 400, "message": str(dict(request.headers))}, status=400)
            return None

        async def slow(request: web.Request) -> web.Response | None:
            if self.mode == "slow":
                self.waiting += 1
                try:
                    await self.released.wait()
                finally:
                    self.waiting -= 1
            return record(request)

        async def document(request: web.Request) -> web.Response:
            return web.Response(text=self.document, content_type="application/yaml")

        async def list_pets(request: web.Request) -> web.Response:
            if (failed := await slow(request)) is not None:
                return failed
            return web.json_response(PETS[: int(request.query.get("limit", "100"))])

        async def create_pets(request: web.Request) -> web.Response:
            if (failed := record(request)) is not None:
                return failed
            self.created.append(await request.json() if request.can_read_body else None)
            return web.json_response({"id": 100 + len(self.created)}, status=201)

        async def show_pet(request: web.Request) -> web.Response:
            if (failed := record(request)) is not None:
                return failed
            pets = [p for p in PETS if str(p["id"]) == request.match_info["pet_id"]]
            if not pets:
                return web.json_response({"code": 404, "message": "no such pet"}, status=404)
            return web.json_response(pets)

        app.router.add_get("/petstore.yaml", document)
        app.router.add_get("/v1/pets", list_pets)
        app.router.add_post("/v1/pets", create_pets)
        app.router.add_get("/v1/pets/{pet_id}", show_pet)
        return app


@contextlib.asynccontextmanager
async def serve_petstore() -> AsyncIterator[Petstore]:
    store = Petstore()
    runner = web.AppRunner(store.app())
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    store.base_url = f"http://127.0.0.1:{port}/v1"
    try:
        yield store
    finally:
        store.released.set()
        await runner.cleanup()
