"""Two instances on PostgreSQL and Redis, reached directly and through nginx: one set of
tokens, listings, storages, metas, users, settings, tasks and login counters."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import pytest

from tests.multi.conftest import FTP_BYTES_PER_SECOND, SOON, WAIT, Cluster, Node, wait_until

PASSWORD = "user-secret-pw-1"
SUCCEEDED = 2


def ftp_folder(cluster: Cluster, files: dict[str, bytes]) -> str:
    """A new folder on the FTP server; its path in the tree."""
    name = cluster.unique("f")
    for file, data in files.items():
        (cluster.ftp.root / name).mkdir(exist_ok=True)
        (cluster.ftp.root / name / file).write_bytes(data)
    return f"/ftp/{name}"


def test_a_token_from_one_instance_works_on_the_other(cluster: Cluster) -> None:
    name, _ = cluster.user(PASSWORD)
    for issuer in (cluster.a, cluster.b, cluster.lb):
        token = issuer.login(name, PASSWORD)
        for node in (cluster.a, cluster.b, cluster.lb, cluster.lb):
            assert node.ok("/api/me", token=token)["username"] == name, (issuer, node)


@pytest.mark.parametrize("where", ["a", "b", "lb"])
def test_a_logout_on_one_revokes_the_token_on_both(cluster: Cluster, where: str) -> None:
    name, _ = cluster.user(PASSWORD)
    token = cluster.a.login(name, PASSWORD)
    for node in (cluster.a, cluster.b):
        assert node.ok("/api/me", token=token)["username"] == name
    getattr(cluster, where).ok("/api/auth/logout", token=token)
    for node in (cluster.a, cluster.b, cluster.lb, cluster.lb):
        assert node.call("/api/me", token=token)["code"] == 401, node


def test_a_password_change_on_one_revokes_tokens_on_both(cluster: Cluster) -> None:
    name, _ = cluster.user(PASSWORD)
    old = cluster.a.login(name, PASSWORD)
    cluster.b.ok("/api/me", token=old)
    cluster.b.ok("/api/me/update", {"username": name, "password": "new-secret-pw-2"}, old)
    for node in (cluster.a, cluster.b, cluster.lb, cluster.lb):
        assert node.call("/api/me", token=old)["code"] == 401, node
    assert (
        cluster.a.call("/api/auth/login", {"username": name, "password": PASSWORD})["code"] == 400
    )
    fresh = cluster.a.login(name, "new-secret-pw-2")
    assert cluster.b.ok("/api/me", token=fresh)["username"] == name


def test_a_rename_through_one_is_listed_by_the_other_at_once(cluster: Cluster) -> None:
    folder = ftp_folder(cluster, {"one.txt": b"1", "two.txt": b"2"})
    admin = cluster.admin
    for node in (cluster.a, cluster.b, cluster.lb, cluster.lb):  # warm every cache
        assert node.names(folder, admin) == ["one.txt", "two.txt"]
    cluster.a.ok("/api/fs/rename", {"path": f"{folder}/one.txt", "name": "uno.txt"}, admin)
    assert cluster.b.names(folder, admin) == ["two.txt", "uno.txt"]
    cluster.b.ok("/api/fs/rename", {"path": f"{folder}/two.txt", "name": "dos.txt"}, admin)
    assert cluster.a.names(folder, admin) == ["dos.txt", "uno.txt"]
    for _ in range(2):
        assert cluster.lb.names(folder, admin) == ["dos.txt", "uno.txt"]
    cluster.lb.ok("/api/fs/rename", {"path": f"{folder}/dos.txt", "name": "tres.txt"}, admin)
    for node in (cluster.a, cluster.b):
        assert node.names(folder, admin) == ["tres.txt", "uno.txt"]


def test_a_storage_created_and_disabled_on_one_applies_on_the_other(
    cluster: Cluster, tmp_path: Path
) -> None:
    (tmp_path / "inside.txt").write_text("x")
    mount = "/" + cluster.unique("s")
    admin = cluster.admin
    body = {"mount_path": mount, "driver": "Local",
            "addition": json.dumps({"root_folder_path": str(tmp_path)})}  # fmt: skip
    storage_id = cluster.a.ok("/api/admin/storage/create", body, admin)["id"]
    wait_until(lambda: mount[1:] in cluster.b.names("/", admin), SOON, "storage on b")
    assert cluster.b.names(mount, admin) == ["inside.txt"]
    cluster.b.ok(f"/api/admin/storage/disable?id={storage_id}", {}, admin)
    wait_until(lambda: mount[1:] not in cluster.a.names("/", admin), SOON, "gone from a")
    cluster.a.ok(f"/api/admin/storage/delete?id={storage_id}", {}, admin)


def test_a_meta_created_on_one_applies_on_the_other(cluster: Cluster) -> None:
    folder = ftp_folder(cluster, {"secret.txt": b"s"})
    name, _ = cluster.user(PASSWORD)
    token = cluster.b.login(name, PASSWORD)
    assert cluster.b.names(folder, token) == ["secret.txt"]
    meta = {"path": folder, "password": "folder-pw", "p_sub": True}
    cluster.a.ok("/api/admin/meta/create", meta, cluster.admin)
    body = {"path": folder, "page": 1, "per_page": 0}

    def refused() -> bool:
        return cluster.b.call("/api/fs/list", body, token)["code"] == 403

    wait_until(refused, SOON, "the folder password asked on b")
    assert cluster.b.names(folder, token, password="folder-pw") == ["secret.txt"]


def test_a_user_disabled_on_one_is_refused_by_the_other(cluster: Cluster) -> None:
    name, user_id = cluster.user(PASSWORD)
    token = cluster.b.login(name, PASSWORD)
    assert cluster.b.ok("/api/me", token=token)["username"] == name
    user = cluster.a.ok(f"/api/admin/user/get?id={user_id}", token=cluster.admin)
    cluster.a.ok("/api/admin/user/update", {**user, "disabled": True}, cluster.admin)
    wait_until(lambda: cluster.b.call("/api/me", token=token)["code"] != 200, SOON, "refused")
    refused = cluster.b.call("/api/auth/login", {"username": name, "password": PASSWORD})
    assert refused["code"] != 200


def test_a_setting_saved_on_one_applies_on_the_other(cluster: Cluster) -> None:
    title = cluster.unique("Site ")
    cluster.a.ok("/api/admin/setting/save", [{"key": "site_title", "value": title}],
                 cluster.admin)  # fmt: skip

    def shown() -> bool:
        return bool(cluster.b.ok("/api/public/settings")["site_title"] == title)

    wait_until(shown, SOON, "the new title on b")


def test_five_wrong_passwords_over_both_instances_lock_the_account(cluster: Cluster) -> None:
    name, _ = cluster.user(PASSWORD)
    a, b = (Node(n.name, n.base, client="10.22.0.1") for n in cluster.instances)
    wrong = {"username": name, "password": "not-the-password"}
    for node in (a, b, a, b, a):
        assert node.call("/api/auth/login", wrong)["code"] == 400
    right = {"username": name, "password": PASSWORD}
    for node in (a, b):
        assert node.call("/api/auth/login", right)["code"] == 429
    # The name is locked for any new address too, whichever instance it reaches.
    for node, address in ((cluster.a, "10.22.0.2"), (cluster.b, "10.22.0.3")):
        stranger = Node(node.name, node.base, client=address)
        assert stranger.call("/api/auth/login", right)["code"] == 429


def test_a_copy_whose_instance_is_killed_is_finished_by_the_other(
    cluster: Cluster, tmp_path: Path
) -> None:
    # About three seconds through the throttled FTP server.
    data = os.urandom(3 * FTP_BYTES_PER_SECOND)
    source = ftp_folder(cluster, {"big.bin": data})
    target = tmp_path / "target"
    target.mkdir()
    mount = "/" + cluster.unique("t")
    admin = cluster.admin
    body = {"mount_path": mount, "driver": "Local",
            "addition": json.dumps({"root_folder_path": str(target)})}  # fmt: skip
    cluster.a.ok("/api/admin/storage/create", body, admin)
    wait_until(lambda: mount[1:] in cluster.b.names("/", admin), SOON, "storage on b")
    copy = {"src_dir": source, "dst_dir": mount, "names": ["big.bin"]}
    task_id = cluster.a.ok("/api/fs/copy", copy, admin)["tasks"][0]["id"]

    def running_on_a() -> bool:
        task = cluster.b.ok(f"/api/admin/task/copy/info?tid={task_id}", {}, admin)
        return bool(task["state"] == 1 and task["progress"] > 0)

    wait_until(running_on_a, WAIT, "the copy under way")
    cluster.daemons["a"].kill()
    try:

        def done() -> bool:
            task = cluster.lb.ok(f"/api/admin/task/copy/info?tid={task_id}", {}, admin)
            assert task["state"] in (1, 0, 8, 9, SUCCEEDED), task
            return bool(task["state"] == SUCCEEDED)

        wait_until(done, WAIT, "the copy finished by b")
        copied = (target / "big.bin").read_bytes()
        assert hashlib.sha256(copied).digest() == hashlib.sha256(data).digest()
        assert sorted(p.name for p in target.iterdir()) == ["big.bin"]
        # Read twice from the FTP server: by a until it died, then all of it by b.
        assert cluster.ftp.reads(f"{source[5:]}/big.bin") == [False, True]
    finally:
        cluster.daemons["a"].start()
