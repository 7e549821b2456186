"""Who gets in while Redis is away: two instances on PostgreSQL and a Redis of their
own, which these tests hang (SIGSTOP: connections stay open, nothing answers) or kill.

An admin's change answers success once it is committed; meanwhile the other instance
confirms tokens from the database, so a disabled user or a revoked token is refused
there during the outage, and stays refused once Redis is back and the bus carries
changes again.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import pytest

from tests.fixtures.processes import Daemon
from tests.fixtures.redisserver import have_redis, redis_daemon
from tests.multi.conftest import WAIT, Cluster, FtpServer, running_cluster, wait_until

PASSWORD = "outage-secret-pw-1"
# How long the other instance may go on accepting what was revoked: generous for a
# loaded machine, far below "the whole outage".
REFUSED_WITHIN = 15.0


class Outage:
    def __init__(self, cluster: Cluster, redis: Daemon) -> None:
        self.cluster = cluster
        self.redis = redis

    @contextlib.contextmanager
    def of(self, kind: str) -> Iterator[None]:
        """Redis hung (``hung``) or dead (``dead``) while the block runs."""
        if kind == "hung":
            with self.redis.paused():
                yield
            return
        self.redis.kill()
        try:
            yield
        finally:
            self.redis.start()


@pytest.fixture(scope="module")
def outage(tmp_path_factory: pytest.TempPathFactory, throttled_ftp: FtpServer) -> Iterator[Outage]:
    if not have_redis():
        pytest.fail("redis-server is not installed: run the test command from README.md")
    base = tmp_path_factory.mktemp("outage")
    redis, url = redis_daemon(base / "redis")
    redis.start()
    try:
        with running_cluster(base, url, throttled_ftp) as cluster:
            yield Outage(cluster, redis)
    finally:
        redis.stop()


def accepted(cluster: Cluster, token: str, node: str) -> bool:
    return bool(getattr(cluster, node).call("/api/me", token=token)["code"] == 200)


def set_disabled(cluster: Cluster, user_id: int, disabled: bool) -> None:
    """The admin's change through instance ``a``; it must answer success."""
    user = cluster.a.ok(f"/api/admin/user/get?id={user_id}", token=cluster.admin)
    cluster.a.ok("/api/admin/user/update", {**user, "disabled": disabled}, cluster.admin)


def changes_flow_again(cluster: Cluster, name: str, user_id: int) -> None:
    """With Redis back, a change on ``a`` reaches ``b`` over the bus as before."""
    set_disabled(cluster, user_id, False)
    fresh = cluster.b.login(name, PASSWORD)
    set_disabled(cluster, user_id, True)
    wait_until(lambda: not accepted(cluster, fresh, "b"), WAIT, "b refuses after Redis")


@pytest.mark.parametrize("kind", ["hung", "dead"])
def test_a_user_disabled_during_an_outage_is_refused_by_the_other(
    outage: Outage, kind: str
) -> None:
    cluster = outage.cluster
    name, user_id = cluster.user(PASSWORD)
    token = cluster.b.login(name, PASSWORD)
    assert accepted(cluster, token, "b")  # b has the user cached
    with outage.of(kind):
        set_disabled(cluster, user_id, True)
        wait_until(lambda: not accepted(cluster, token, "b"), REFUSED_WITHIN, "b refuses")
        assert not accepted(cluster, token, "a")
    for node in ("a", "b", "b", "a"):
        assert not accepted(cluster, token, node), node
    changes_flow_again(cluster, name, user_id)


@pytest.mark.parametrize("kind", ["hung", "dead"])
def test_a_logout_during_an_outage_revokes_the_token_on_the_other(
    outage: Outage, kind: str
) -> None:
    cluster = outage.cluster
    name, user_id = cluster.user(PASSWORD)
    token = cluster.a.login(name, PASSWORD)
    kept = cluster.a.login(name, PASSWORD)
    for node in ("a", "b"):
        assert accepted(cluster, token, node), node
    with outage.of(kind):
        answer = cluster.a.call("/api/auth/logout", token=token)
        assert answer["code"] == 200, answer
        wait_until(lambda: not accepted(cluster, token, "b"), REFUSED_WITHIN, "b refuses")
        assert not accepted(cluster, token, "a")
        # Only that token: the user's other one still works on both.
        for node in ("a", "b"):
            assert accepted(cluster, kept, node), node
    for node in ("a", "b", "b", "a"):
        assert not accepted(cluster, token, node), node
        assert accepted(cluster, kept, node), node
    changes_flow_again(cluster, name, user_id)
