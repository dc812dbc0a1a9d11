"""Telling connected MCP sessions that the skills they can see changed (``notifications/resources/list_changed``).

The notifier compares :meth:`Catalog.change_mark` for the session's principal every ``interval_s`` (one
small ``GROUP BY`` over the skills table). The mark moves whenever a skill of a grant the principal can see
is added, changed, withdrawn or hidden by a revocation, whichever process wrote it: a watched folder in
this process, a ``skillsearch sources sync`` or a subscription sync in another. A change in a grant the
principal cannot see moves nothing, so a session learns nothing about other grants.

Both protocol eras of the mcp SDK are served:

- handshake era (``initialize``): each session is remembered once its ``notifications/initialized``
  arrives (a server middleware sees it) and gets the notification on its own channel;
- 2026-07-28 era: the event is published on the server's subscription bus, which delivers it to every
  ``subscriptions/listen`` stream that asked for ``resourcesListChanged``.

It is meant for a server with one principal for all its sessions (stdio: ``skillsearch mcp``). The HTTP
server is stateless (no standing session to notify, and the bus cannot tell callers apart), so it does not
use it; HTTP hosts re-list on their own schedule.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import AbstractAsyncContextManager, AsyncExitStack, asynccontextmanager
from typing import Any

import anyio
from mcp.server.context import ServerRequestContext
from mcp.server.session import ServerSession
from mcp.server.subscriptions import InMemorySubscriptionBus, ResourcesListChanged

from skillsearch.core.domain import Principal
from skillsearch.service import Catalog

__all__ = ["ChangeNotifier", "WhileOpen", "serving_changes"]

log = logging.getLogger("skillsearch.mcp")

WhileOpen = Callable[[Catalog], AbstractAsyncContextManager[Any]]
"""Something that runs while the server's catalog is open, e.g. the local sources' keeper:
``lambda catalog: catalog.sources.keeper(sources).lifespan()``."""


class ChangeNotifier:
    def __init__(self, principal: Principal, interval_s: float = 0.5) -> None:
        self.principal = principal
        self.interval_s = interval_s
        self.bus = InMemorySubscriptionBus()
        self._sessions: list[ServerSession] = []
        self.sent = 0

    async def middleware(
        self, ctx: ServerRequestContext[Any, Any], call_next: Callable[[ServerRequestContext[Any, Any]], Awaitable[Any]]
    ) -> Any:
        """A server middleware: remembers each handshake-era session once it is initialized."""
        result = await call_next(ctx)
        if ctx.method == "notifications/initialized" and ctx.session not in self._sessions:
            self._sessions.append(ctx.session)
        return result

    async def notify(self) -> None:
        self.sent += 1
        await self.bus.publish(ResourcesListChanged())
        for session in list(self._sessions):
            try:
                await session.send_resource_list_changed()
            except Exception:  # a session that went away: forget it
                log.debug("dropping an MCP session that cannot be notified", exc_info=True)
                self._sessions.remove(session)

    async def watch(self, catalog: Catalog) -> None:
        """Run until cancelled: notify after every change of what the principal can see."""
        last = await anyio.to_thread.run_sync(catalog.change_mark, self.principal)
        while True:
            await anyio.sleep(self.interval_s)
            try:
                mark = await anyio.to_thread.run_sync(catalog.change_mark, self.principal)
            except Exception:  # a locked or briefly unreadable catalog: look again next time
                log.warning("could not read the catalog's change mark", exc_info=True)
                continue
            if mark != last:
                last = mark
                await self.notify()


@asynccontextmanager
async def serving_changes(catalog: Catalog, notifier: ChangeNotifier | None,
                          extras: Sequence[WhileOpen]) -> AsyncIterator[None]:
    """Inside the server's lifespan, once the catalog is open: enter ``extras`` and run the notifier."""
    async with AsyncExitStack() as stack:  # at exit, last pushed first
        stack.callback(catalog.resume_writes)  # last: the keeper is joined; the catalog may outlive this server
        for extra in extras:
            await stack.enter_async_context(extra(catalog))
        tg = await stack.enter_async_context(anyio.create_task_group())
        stack.callback(tg.cancel_scope.cancel)
        stack.callback(catalog.stop_writes)  # first: a source's embedding stops at its next batch before the keeper is joined
        if notifier is not None:
            tg.start_soon(notifier.watch, catalog)
        yield
