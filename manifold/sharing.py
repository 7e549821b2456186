"""What each process applies of the changes the others announce on the change bus.

Every service announces its own changes (``storage``, ``metas``, ``settings``,
``user``, ``revoked``, ``listing``, ``index-stop``); here each topic
is tied to what applies it in this process. A ``resync`` (the bus may have missed
messages) reloads everything the messages would have touched.

Listings: a write through one process drops the folders it patched in every other
process as soon as the message arrives, within milliseconds on Redis and within the
poll interval (``sql_bus.POLL_SECONDS``, 0.2 s) on the database bus; ``bus.sync()``
waits for it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from manifold.state.bus import RESYNC, Bus

if TYPE_CHECKING:
    from manifold.container import Services


def listen(bus: Bus, services: Services) -> None:
    """Subscribe ``services`` to what the other processes announce on ``bus``."""
    storages, users = services.storages, services.users

    async def storage(data: dict[str, Any]) -> None:
        await storages.apply_change(int(data["id"]))

    async def listing(data: dict[str, Any]) -> None:
        storages.dropped(int(data["id"]), str(data["path"]), bool(data.get("below")))

    async def metas(_: dict[str, Any]) -> None:
        await services.metas.start()

    async def settings(_: dict[str, Any]) -> None:
        await services.settings.reload()

    async def user(data: dict[str, Any]) -> None:
        users.forget(str(data.get("name", "")))
        services.credentials.forget()

    async def revoked(data: dict[str, Any]) -> None:
        services.revocations.learn(str(data["jti"]), int(data["exp"]))

    async def index_stop(_: dict[str, Any]) -> None:
        services.search.stop_here()

    async def resync(_: dict[str, Any]) -> None:
        await services.settings.reload()
        await services.metas.start()
        users.forget_all()
        services.credentials.forget()
        await services.revocations.load()
        storages.drop_listings()
        await storages.apply_all()

    for topic, handler in (
        ("storage", storage),
        ("listing", listing),
        ("metas", metas),
        ("settings", settings),
        ("user", user),
        ("revoked", revoked),
        ("index-stop", index_stop),
        (RESYNC, resync),
    ):
        bus.subscribe(topic, handler)
