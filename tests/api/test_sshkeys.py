"""SSH public keys: /api/me/sshkey/* and /api/admin/user/sshkey/*."""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import Api


@dataclass(frozen=True)
class KeyPair:
    text: str
    fingerprint: str


def keygen(folder: Path, name: str, *args: str) -> KeyPair:
    private = folder / name
    subprocess.run(
        ["ssh-keygen", "-q", "-N", "", "-C", f"{name}@test", "-f", str(private), *args],
        check=True,
        capture_output=True,
    )
    listed = subprocess.run(
        ["ssh-keygen", "-lf", f"{private}.pub"], check=True, capture_output=True, text=True
    )
    return KeyPair(Path(f"{private}.pub").read_text(), listed.stdout.split()[1])


@pytest.fixture(scope="session")
def keys(tmp_path_factory: pytest.TempPathFactory) -> dict[str, KeyPair]:
    folder = tmp_path_factory.mktemp("sshkeys")
    return {
        "ed25519": keygen(folder, "ed25519", "-t", "ed25519"),
        "ed25519-b": keygen(folder, "ed25519-b", "-t", "ed25519"),
        "rsa": keygen(folder, "rsa", "-t", "rsa", "-b", "2048"),
        "ecdsa": keygen(folder, "ecdsa", "-t", "ecdsa", "-b", "256"),
    }


@dataclass
class Person:
    uid: int
    token: str


async def person(api: Api, name: str) -> Person:
    uid = await api.make_user(name, f"{name}-pw")
    return Person(uid, await api.login(name, f"{name}-pw"))


async def add(api: Api, who: Person, title: str, key: str) -> dict[str, Any]:
    return await api.post("/api/me/sshkey/add", {"title": title, "key": key}, token=who.token)


async def listed(api: Api, who: Person) -> list[dict[str, Any]]:
    body = await api.get("/api/me/sshkey/list", token=who.token)
    assert body["code"] == 200, body
    content: list[dict[str, Any]] = body["data"]["content"]
    assert body["data"]["total"] == len(content)
    return content


@pytest.mark.parametrize("kind", ["ed25519", "rsa", "ecdsa"])
async def test_add_lists_title_and_keygen_fingerprint(
    api: Api, keys: dict[str, KeyPair], kind: str
) -> None:
    alice = await person(api, "alice")
    body = await add(api, alice, f"my {kind}", keys[kind].text)
    assert (body["code"], body["message"]) == (200, "success")
    [key] = await listed(api, alice)
    assert set(key) == {"id", "title", "fingerprint", "added_time", "last_used_time"}
    assert key["title"] == f"my {kind}"
    assert key["fingerprint"] == keys[kind].fingerprint
    assert key["fingerprint"].startswith("SHA256:")


async def test_times_are_iso_8601_with_offset(api: Api, keys: dict[str, KeyPair]) -> None:
    alice = await person(api, "alice")
    await add(api, alice, "laptop", keys["ed25519"].text)
    [key] = await listed(api, alice)
    added = datetime.fromisoformat(key["added_time"])
    used = datetime.fromisoformat(key["last_used_time"])
    assert added.utcoffset() is not None
    assert used.utcoffset() is not None
    assert added == used


async def test_keys_are_listed_in_id_order(api: Api, keys: dict[str, KeyPair]) -> None:
    alice = await person(api, "alice")
    for title, kind in (("one", "rsa"), ("two", "ecdsa"), ("three", "ed25519")):
        assert (await add(api, alice, title, keys[kind].text))["code"] == 200
    content = await listed(api, alice)
    assert [k["title"] for k in content] == ["one", "two", "three"]
    assert [k["id"] for k in content] == sorted(k["id"] for k in content)


@pytest.mark.parametrize(
    "text",
    [
        "not a key at all",
        "ssh-ed25519 AAAA",
        "ssh-ed25519 !!!notbase64!!!",
    ],
)
async def test_malformed_key_is_400(api: Api, text: str) -> None:
    alice = await person(api, "alice")
    body = await add(api, alice, "bad", text)
    assert (body["code"], body["message"]) == (400, "provided key invalid")
    assert await listed(api, alice) == []


@pytest.mark.parametrize("title", ["", "   "])
async def test_empty_title_is_400(api: Api, keys: dict[str, KeyPair], title: str) -> None:
    alice = await person(api, "alice")
    body = await add(api, alice, title, keys["ed25519"].text)
    assert (body["code"], body["message"]) == (400, "request invalid")
    assert await listed(api, alice) == []


async def test_same_title_twice_is_500(api: Api, keys: dict[str, KeyPair]) -> None:
    alice = await person(api, "alice")
    assert (await add(api, alice, "laptop", keys["ed25519"].text))["code"] == 200
    body = await add(api, alice, "laptop", keys["rsa"].text)
    assert (body["code"], body["message"]) == (500, "key with the same title already exists")
    assert [k["fingerprint"] for k in await listed(api, alice)] == [keys["ed25519"].fingerprint]


async def test_same_title_is_checked_before_the_key(api: Api, keys: dict[str, KeyPair]) -> None:
    alice = await person(api, "alice")
    await add(api, alice, "laptop", keys["ed25519"].text)
    body = await add(api, alice, "laptop", "garbage")
    assert (body["code"], body["message"]) == (500, "key with the same title already exists")


async def test_same_key_under_a_second_title_is_refused(api: Api, keys: dict[str, KeyPair]) -> None:
    alice = await person(api, "alice")
    assert (await add(api, alice, "first", keys["rsa"].text))["code"] == 200
    body = await add(api, alice, "second", keys["rsa"].text)
    assert (body["code"], body["message"]) == (400, "this key is already added")
    assert [k["title"] for k in await listed(api, alice)] == ["first"]


async def test_two_users_may_share_a_title_and_a_key(api: Api, keys: dict[str, KeyPair]) -> None:
    alice, bob = await person(api, "alice"), await person(api, "bob")
    assert (await add(api, alice, "laptop", keys["ecdsa"].text))["code"] == 200
    assert (await add(api, bob, "laptop", keys["ecdsa"].text))["code"] == 200
    assert len(await listed(api, alice)) == 1
    assert len(await listed(api, bob)) == 1


async def test_delete_own_key(api: Api, keys: dict[str, KeyPair]) -> None:
    alice = await person(api, "alice")
    await add(api, alice, "a", keys["ed25519"].text)
    await add(api, alice, "b", keys["ed25519-b"].text)
    first, second = await listed(api, alice)
    body = await api.post("/api/me/sshkey/delete", params={"id": first["id"]}, token=alice.token)
    assert (body["code"], body["message"]) == (200, "success")
    assert await listed(api, alice) == [second]


async def test_delete_another_users_key_is_404_and_keeps_it(
    api: Api, keys: dict[str, KeyPair]
) -> None:
    alice, bob = await person(api, "alice"), await person(api, "bob")
    await add(api, alice, "laptop", keys["ed25519"].text)
    [key] = await listed(api, alice)
    body = await api.post("/api/me/sshkey/delete", params={"id": key["id"]}, token=bob.token)
    assert (body["code"], body["message"]) == (404, "failed to get public key")
    assert await listed(api, alice) == [key]


async def test_delete_missing_key_is_404(api: Api) -> None:
    alice = await person(api, "alice")
    body = await api.post("/api/me/sshkey/delete", params={"id": 999}, token=alice.token)
    assert (body["code"], body["message"]) == (404, "failed to get public key")


async def enable_guest(api: Api) -> None:
    await api.as_admin()
    listing = await api.get("/api/admin/user/list")
    guest = next(u for u in listing["data"]["content"] if u["username"] == "guest")
    body = await api.post("/api/admin/user/update", {**guest, "disabled": False})
    assert body["code"] == 200, body
    api.token = ""


@pytest.mark.parametrize(
    ("method", "path", "params", "json"),
    [
        ("GET", "/api/me/sshkey/list", None, None),
        ("POST", "/api/me/sshkey/add", None, {"title": "t", "key": "k"}),
        ("POST", "/api/me/sshkey/delete", {"id": 1}, None),
    ],
)
async def test_guest_is_refused(
    api: Api, method: str, path: str, params: dict[str, Any] | None, json: Any
) -> None:
    await enable_guest(api)
    body = await api.call(method, path, params=params, json=json, token="")
    assert (body["code"], body["message"]) == (401, "user invalid")


async def test_admin_lists_a_users_keys(api: Api, keys: dict[str, KeyPair]) -> None:
    alice, bob = await person(api, "alice"), await person(api, "bob")
    await add(api, alice, "a1", keys["rsa"].text)
    await add(api, alice, "a2", keys["ecdsa"].text)
    await add(api, bob, "b1", keys["ed25519"].text)
    await api.as_admin()
    body = await api.get("/api/admin/user/sshkey/list", params={"uid": alice.uid})
    assert body["code"] == 200
    assert body["data"]["total"] == 2
    assert [k["title"] for k in body["data"]["content"]] == ["a1", "a2"]
    assert [k["fingerprint"] for k in body["data"]["content"]] == [
        keys["rsa"].fingerprint,
        keys["ecdsa"].fingerprint,
    ]
    page = await api.get(
        "/api/admin/user/sshkey/list", params={"uid": alice.uid, "page": 2, "per_page": 1}
    )
    assert ([k["title"] for k in page["data"]["content"]], page["data"]["total"]) == (["a2"], 2)


async def test_admin_deletes_any_users_key(api: Api, keys: dict[str, KeyPair]) -> None:
    alice = await person(api, "alice")
    await add(api, alice, "a1", keys["rsa"].text)
    [key] = await listed(api, alice)
    await api.as_admin()
    body = await api.post("/api/admin/user/sshkey/delete", params={"id": key["id"]})
    assert (body["code"], body["message"]) == (200, "success")
    assert await listed(api, alice) == []


async def test_admin_delete_of_missing_key_succeeds(api: Api) -> None:
    await api.as_admin()
    body = await api.post("/api/admin/user/sshkey/delete", params={"id": 999})
    assert (body["code"], body["message"]) == (200, "success")


async def test_admin_key_routes_refuse_non_admin(api: Api) -> None:
    alice = await person(api, "alice")
    listing = await api.get(
        "/api/admin/user/sshkey/list", params={"uid": alice.uid}, token=alice.token
    )
    assert (listing["code"], listing["message"]) == (403, "You are not an admin")
    deleting = await api.post("/api/admin/user/sshkey/delete", params={"id": 1}, token=alice.token)
    assert (deleting["code"], deleting["message"]) == (403, "You are not an admin")


async def test_admin_lists_keys_of_missing_user_as_404(api: Api) -> None:
    await api.as_admin()
    body = await api.get("/api/admin/user/sshkey/list", params={"uid": 999})
    assert (body["code"], body["message"]) == (404, "user invalid")
