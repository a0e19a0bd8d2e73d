"""The app's cleanup contexts as parts: a setup starts its parts in order on a `Parts`, and the
app's cleanup closes them in reverse (a setup that fails closes what it had started)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable

from aiohttp import web

from infra.lifecycle import Parts

Setup = Callable[[web.Application, Parts], Awaitable[None]]


def owning(setup: Setup) -> Callable[[web.Application], AsyncIterator[None]]:
    """A cleanup context (for `app.cleanup_ctx`) that runs `setup` and closes what it started."""
    async def context(app: web.Application) -> AsyncIterator[None]:
        async with Parts() as parts:
            await setup(app, parts)
            yield

    context.__name__ = context.__qualname__ = setup.__name__
    return context
