"""Changing the file tree: mkdir, rename, move, copy, remove and uploads over Local."""

from __future__ import annotations

import hashlib
import os
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlsplit

import pytest

from manifold.models import Perm
from tests.api.fs_helpers import add_meta, fs_list, make_tree, mount_local, names
from tests.conftest import Api

USER_PW = "writer-password-1"
PERMISSION_DENIED = "permission denied"

TREE: dict[str, bytes | str] = {
    "a.txt": "alpha",
    "b.txt": "beta",
    "sub/c.txt": "gamma",
    "sub/deeper/d.txt": "delta",
    "empty/": "",
}


async def user_token(api: Api, permission: int, name: str = "writer", **fields: Any) -> str:
    await api.make_user(name, USER_PW, permission=permission, **fields)
    return await api.login(name, USER_PW)


def leftovers(root: Path) -> list[str]:
    """Temporary upload files anywhere below ``root``: there must never be any."""
    return [
        os.path.join(folder, name)
        for folder, _, files in os.walk(root)
        for name in files
        if name.startswith(".manifold-upload")
    ]


async def put(
    api: Api,
    path: str,
    content: bytes | AsyncIterator[bytes],
    token: str | None = None,
    **headers: str,
) -> dict[str, Any]:
    sent = {"File-Path": quote(path), **headers}
    auth = api.token if token is None else token
    if auth:
        sent["Authorization"] = auth
    response = await api.client.put("/api/fs/put", content=content, headers=sent)
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


# --- mkdir --------------------------------------------------------------------


async def test_mkdir_creates_missing_parents_and_is_idempotent(admin: Api, root: Path) -> None:
    for _ in range(2):
        body = await admin.post("/api/fs/mkdir", {"path": "/local/new/deeper/deepest"})
        assert body["code"] == 200, body
    assert (root / "new/deeper/deepest").is_dir()
    assert "new" in names(await fs_list(admin, "/local"))


async def test_mkdir_over_a_file_fails(admin: Api, root: Path) -> None:
    body = await admin.post("/api/fs/mkdir", {"path": "/local/a.txt"})
    assert body["code"] == 500
    assert "file exists" in body["message"]
    assert (root / "a.txt").read_text() == "alpha"


async def test_mkdir_needs_write_permission_or_a_write_meta(admin: Api, root: Path) -> None:
    token = await user_token(admin, permission=0)
    body = await admin.post("/api/fs/mkdir", {"path": "/local/x"}, token=token)
    assert (body["code"], body["message"]) == (403, PERMISSION_DENIED)
    assert not (root / "x").exists()
    await add_meta(admin, "/local", write=True)
    body = await admin.post("/api/fs/mkdir", {"path": "/local/x"}, token=token)
    assert body["code"] == 200, body
    assert (root / "x").is_dir()


async def test_mkdir_without_storage(api: Api) -> None:
    await api.as_admin()
    body = await api.post("/api/fs/mkdir", {"path": "/nowhere"})
    assert body["code"] == 500
    assert "please add a storage first" in body["message"]


# --- rename -------------------------------------------------------------------


async def test_rename_file_and_folder(admin: Api, root: Path) -> None:
    body = await admin.post("/api/fs/rename", {"path": "/local/a.txt", "name": "z.txt"})
    assert body["code"] == 200, body
    body = await admin.post("/api/fs/rename", {"path": "/local/sub", "name": "moved sub"})
    assert body["code"] == 200, body
    assert (root / "z.txt").read_text() == "alpha"
    assert (root / "moved sub/deeper/d.txt").read_text() == "delta"
    assert not (root / "a.txt").exists()


@pytest.mark.parametrize("name", ["x/y", "..", "../escape", "a\\b", "nul\x00", ""])
async def test_rename_refuses_names_that_are_not_one_segment(
    admin: Api, root: Path, name: str
) -> None:
    body = await admin.post("/api/fs/rename", {"path": "/local/a.txt", "name": name})
    assert body["code"] in (400, 403), body
    assert (root / "a.txt").read_text() == "alpha"
    assert not (root.parent / "escape").exists()


async def test_rename_onto_taken_name(admin: Api, root: Path) -> None:
    body = await admin.post("/api/fs/rename", {"path": "/local/a.txt", "name": "b.txt"})
    assert (body["code"], body["message"]) == (403, "file [b.txt] exists")
    assert (root / "b.txt").read_text() == "beta"
    body = await admin.post(
        "/api/fs/rename", {"path": "/local/a.txt", "name": "b.txt", "overwrite": True}
    )
    assert body["code"] == 200, body
    assert (root / "b.txt").read_text() == "alpha"


async def test_rename_needs_the_rename_bit(admin: Api, root: Path) -> None:
    token = await user_token(admin, permission=int(Perm.WRITE))
    body = await admin.post("/api/fs/rename", {"path": "/local/a.txt", "name": "q"}, token=token)
    assert (body["code"], body["message"]) == (403, PERMISSION_DENIED)
    assert (root / "a.txt").exists()


async def test_rename_storage_root_is_refused(admin: Api, root: Path) -> None:
    body = await admin.post("/api/fs/rename", {"path": "/local", "name": "other"})
    assert body["code"] == 500
    assert root.is_dir()


async def test_batch_rename(admin: Api, root: Path) -> None:
    objects = [
        {"src_name": "a.txt", "new_name": "one.txt"},
        {"src_name": "", "new_name": "ignored"},
        {"src_name": "b.txt", "new_name": "two.txt"},
    ]
    body = await admin.post(
        "/api/fs/batch_rename", {"src_dir": "/local", "rename_objects": objects}
    )
    assert body["code"] == 200, body
    assert (root / "one.txt").read_text() == "alpha"
    assert (root / "two.txt").read_text() == "beta"


async def test_batch_rename_checks_every_name_before_renaming(admin: Api, root: Path) -> None:
    objects = [
        {"src_name": "a.txt", "new_name": "fine.txt"},
        {"src_name": "b.txt", "new_name": "../../escaped.txt"},
    ]
    body = await admin.post(
        "/api/fs/batch_rename", {"src_dir": "/local", "rename_objects": objects}
    )
    assert body["code"] in (400, 403), body
    assert (root / "a.txt").exists() and (root / "b.txt").exists()
    assert not (root.parent.parent / "escaped.txt").exists()


async def test_regex_rename_with_go_templates(admin: Api, root: Path) -> None:
    body = await admin.post(
        "/api/fs/regex_rename",
        {"src_dir": "/local", "src_name_regex": r"^(\w)\.txt$", "new_name_regex": "file-$1.md"},
    )
    assert body["code"] == 200, body
    assert (root / "file-a.md").read_text() == "alpha"
    assert (root / "file-b.md").read_text() == "beta"


async def test_regex_rename_bad_regex_and_escaping_results(admin: Api, root: Path) -> None:
    body = await admin.post(
        "/api/fs/regex_rename",
        {"src_dir": "/local", "src_name_regex": "(", "new_name_regex": "x"},
    )
    assert body["code"] == 500
    body = await admin.post(
        "/api/fs/regex_rename",
        {"src_dir": "/local", "src_name_regex": r"^a\.txt$", "new_name_regex": "../a.txt"},
    )
    assert body["code"] in (400, 403), body
    assert (root / "a.txt").exists()


# --- move and copy ------------------------------------------------------------


async def test_move_files_and_folders(admin: Api, root: Path) -> None:
    body = await admin.post(
        "/api/fs/move",
        {"src_dir": "/local", "dst_dir": "/local/empty", "names": ["a.txt", "sub"]},
    )
    assert body["code"] == 200, body
    assert (root / "empty/a.txt").read_text() == "alpha"
    assert (root / "empty/sub/deeper/d.txt").read_text() == "delta"
    assert set(names(await fs_list(admin, "/local"))) == {"b.txt", "empty"}


async def test_move_errors(admin: Api, root: Path, tmp_path: Path) -> None:
    body = await admin.post("/api/fs/move", {"src_dir": "/local", "dst_dir": "/local/sub"})
    assert (body["code"], body["message"]) == (400, "Empty file names")
    (root / "sub/a.txt").write_text("other")
    body = await admin.post(
        "/api/fs/move", {"src_dir": "/local", "dst_dir": "/local/sub", "names": ["a.txt"]}
    )
    assert (body["code"], body["message"]) == (403, "file [a.txt] exists")
    assert (root / "a.txt").read_text() == "alpha"
    second = make_tree(tmp_path / "second", {"b.txt": "taken"})
    await mount_local(admin, "/second", second)
    body = await admin.post(
        "/api/fs/move", {"src_dir": "/local", "dst_dir": "/second", "names": ["b.txt"]}
    )
    assert (body["code"], body["message"]) == (403, "file [b.txt] exists")
    assert (root / "b.txt").exists()
    assert (second / "b.txt").read_text() == "taken"


async def test_move_overwrite_replaces(admin: Api, root: Path) -> None:
    (root / "sub/a.txt").write_text("other")
    body = await admin.post(
        "/api/fs/move",
        {"src_dir": "/local", "dst_dir": "/local/sub", "names": ["a.txt"], "overwrite": True},
    )
    assert body["code"] == 200, body
    assert (root / "sub/a.txt").read_text() == "alpha"


async def test_move_folder_into_itself_fails_and_keeps_it(admin: Api, root: Path) -> None:
    body = await admin.post(
        "/api/fs/move", {"src_dir": "/local", "dst_dir": "/local/sub/deeper", "names": ["sub"]}
    )
    assert body["code"] != 200
    assert (root / "sub/deeper/d.txt").read_text() == "delta"


async def test_copy_within_a_storage_is_immediate(admin: Api, root: Path) -> None:
    body = await admin.post(
        "/api/fs/copy", {"src_dir": "/local", "dst_dir": "/local/empty", "names": ["sub", "a.txt"]}
    )
    assert body["code"] == 200, body
    assert body["data"] == {"tasks": []}
    assert (root / "empty/sub/deeper/d.txt").read_text() == "delta"
    (root / "empty/a.txt").write_text("changed")
    assert (root / "a.txt").read_text() == "alpha"


async def test_move_and_copy_need_their_bits(admin: Api, root: Path) -> None:
    token = await user_token(admin, permission=int(Perm.WRITE | Perm.RENAME))
    request = {"src_dir": "/local", "dst_dir": "/local/empty", "names": ["a.txt"]}
    for route in ("/api/fs/move", "/api/fs/copy", "/api/fs/recursive_move"):
        body = await admin.post(route, request, token=token)
        assert (body["code"], body["message"]) == (403, PERMISSION_DENIED), route
    assert not (root / "empty/a.txt").exists()


# --- remove -------------------------------------------------------------------


async def test_remove_files_and_non_empty_folders(admin: Api, root: Path) -> None:
    body = await admin.post("/api/fs/remove", {"dir": "/local", "names": ["a.txt", "sub", "gone"]})
    assert body["code"] == 200, body
    assert not (root / "a.txt").exists() and not (root / "sub").exists()
    assert set(names(await fs_list(admin, "/local"))) == {"b.txt", "empty"}


@pytest.mark.parametrize("name", ["", "..", "../root", "sub/../..", "/"])
async def test_remove_refuses_odd_names(admin: Api, root: Path, name: str) -> None:
    body = await admin.post("/api/fs/remove", {"dir": "/local/sub", "names": [name]})
    assert body["code"] in (400, 403), body
    assert (root / "sub/c.txt").exists() and root.is_dir()


async def test_remove_errors(admin: Api, root: Path) -> None:
    body = await admin.post("/api/fs/remove", {"dir": "/local", "names": []})
    assert (body["code"], body["message"]) == (400, "Empty file names")
    body = await admin.post("/api/fs/remove", {"dir": "/", "names": ["local"]})
    assert body["code"] == 500
    assert body["message"].startswith("delete root folder is not allowed")
    assert root.is_dir()
    token = await user_token(admin, permission=int(Perm.WRITE))
    body = await admin.post("/api/fs/remove", {"dir": "/local", "names": ["a.txt"]}, token=token)
    assert (body["code"], body["message"]) == (403, PERMISSION_DENIED)
    assert (root / "a.txt").exists()


async def test_remove_empty_directory(admin: Api, root: Path) -> None:
    make_tree(root, {"tree/x/y/": "", "tree/x/z/": "", "tree/keep/file": "f"})
    body = await admin.post("/api/fs/remove_empty_directory", {"src_dir": "/local/tree"})
    assert body["code"] == 200, body
    assert sorted(os.listdir(root / "tree")) == ["keep"]
    assert (root / "tree/keep/file").exists()


async def test_recursive_move_policies(admin: Api, root: Path) -> None:
    make_tree(root, {"src/one": "1", "src/in/two": "2", "src/in/deep/one": "other", "dst/two": "x"})
    body = await admin.post(
        "/api/fs/recursive_move",
        {"src_dir": "/local/src", "dst_dir": "/local/dst", "conflict_policy": "cancel"},
    )
    assert (body["code"], body["message"]) in (
        (403, "file [one] exists"),
        (403, "file [two] exists"),
    )
    assert (root / "src/one").exists() and (root / "src/in/two").exists()
    body = await admin.post(
        "/api/fs/recursive_move",
        {"src_dir": "/local/src", "dst_dir": "/local/dst", "conflict_policy": "skip"},
    )
    assert (body["code"], body["message"]) == (200, "Successfully moved 1 file")
    assert (root / "dst/two").read_text() == "x"
    assert (root / "dst/one").exists()


# --- uploads ------------------------------------------------------------------


AWKWARD = [" spaced ", "#?%&+.txt", "%46ile", "unicodé 文件.txt", ".hidden", "a+b c"]


@pytest.mark.parametrize("name", AWKWARD)
async def test_put_awkward_names(admin: Api, root: Path, name: str) -> None:
    body = await put(admin, f"/local/up/{name}", b"payload")
    assert body["code"] == 200, body
    assert (root / "up" / name).read_bytes() == b"payload"
    assert name in names(await fs_list(admin, "/local/up"))
    assert leftovers(root) == []


async def test_put_plus_is_kept_as_go_path_unescape_does(admin: Api, root: Path) -> None:
    response = await admin.client.put(
        "/api/fs/put",
        content=b"x",
        headers={"File-Path": "/local/a+b%20c", "Authorization": admin.token},
    )
    assert response.json()["code"] == 200
    assert (root / "a+b c").read_bytes() == b"x"


async def test_put_replaces_and_honours_last_modified(admin: Api, root: Path) -> None:
    body = await put(admin, "/local/a.txt", b"new", **{"Last-Modified": "1700000000000"})
    assert body["code"] == 200, body
    assert (root / "a.txt").read_bytes() == b"new"
    assert int((root / "a.txt").stat().st_mtime) == 1_700_000_000


async def test_put_overwrite_false_keeps_the_file(admin: Api, root: Path) -> None:
    body = await put(admin, "/local/a.txt", b"new", Overwrite="false")
    assert (body["code"], body["message"]) == (403, "file exists")
    assert (root / "a.txt").read_text() == "alpha"


async def test_put_bad_escape_and_a_length_that_is_no_number(admin: Api, root: Path) -> None:
    response = await admin.client.put(
        "/api/fs/put",
        content=b"x",
        headers={"File-Path": "/local/bad%zzname", "Authorization": admin.token},
    )
    assert response.json()["code"] == 400

    async def chunked() -> AsyncIterator[bytes]:
        yield b"abc"

    body = await put(admin, "/local/chunked.txt", chunked(), **{"X-File-Size": "three"})
    assert body["code"] == 400
    assert "strconv.ParseInt" in body["message"]
    assert not (root / "chunked.txt").exists()
    body = await put(admin, "/local/chunked.txt", chunked())
    assert body["code"] == 200, body
    assert (root / "chunked.txt").read_text() == "abc"


async def test_put_hash_mismatch_leaves_nothing(admin: Api, root: Path) -> None:
    good = hashlib.md5(b"data", usedforsecurity=False).hexdigest()
    body = await put(admin, "/local/h.txt", b"data", **{"X-File-Md5": good})
    assert body["code"] == 200, body
    body = await put(admin, "/local/h2.txt", b"data", **{"X-File-Sha256": "00" * 32})
    assert body["code"] == 400
    assert not (root / "h2.txt").exists()
    assert leftovers(root) == []


async def test_put_into_password_folder_needs_the_password(admin: Api, root: Path) -> None:
    await add_meta(admin, "/local/sub", password="pw", p_sub=True, write=True, w_sub=True)
    token = await user_token(admin, permission=0)
    body = await put(admin, "/local/sub/new.txt", b"x", token=token)
    assert (body["code"], body["message"]) == (403, PERMISSION_DENIED)
    assert not (root / "sub/new.txt").exists()
    body = await put(admin, "/local/sub/new.txt", b"x", token=token, Password="pw")
    assert body["code"] == 200, body
    assert (root / "sub/new.txt").read_bytes() == b"x"


GUARDED_FOLDERS = {
    # Without p_sub a password guards listing the folder, not fetching a known file in
    # it; writes inside it need the password all the same.
    "a password folder without p_sub": {"path": "/local/sub", "password": "pw"},
    "a folder hidden from the writer": {"path": "/local", "hide": "^sub$"},
}
INSIDE_WRITES: dict[str, Any] = {
    "put over a file": lambda api, t: put(api, "/local/sub/c.txt", b"gone", token=t),
    "put a new file": lambda api, t: put(api, "/local/sub/new.txt", b"x", token=t),
    "mkdir": lambda api, t: api.post("/api/fs/mkdir", {"path": "/local/sub/new"}, token=t),
    "rename": lambda api, t: api.post(
        "/api/fs/rename", {"path": "/local/sub/c.txt", "name": "moved.txt"}, token=t
    ),
    "remove": lambda api, t: api.post(
        "/api/fs/remove", {"dir": "/local/sub", "names": ["c.txt"]}, token=t
    ),
}


@pytest.mark.parametrize("meta", GUARDED_FOLDERS.values(), ids=GUARDED_FOLDERS.keys())
@pytest.mark.parametrize("write", INSIDE_WRITES.values(), ids=INSIDE_WRITES.keys())
async def test_writes_inside_a_guarded_folder_are_refused_like_a_remove(
    admin: Api, root: Path, meta: dict[str, Any], write: Any
) -> None:
    await add_meta(admin, **meta)
    token = await user_token(admin, permission=int(Perm.WRITE | Perm.RENAME | Perm.REMOVE))
    body = await write(admin, token)
    assert body["code"] == 403, body
    assert sorted(os.listdir(root / "sub")) == ["c.txt", "deeper"]
    assert (root / "sub/c.txt").read_text() == "gamma"


async def test_put_needs_write(admin: Api, root: Path) -> None:
    token = await user_token(admin, permission=0)
    body = await put(admin, "/local/new.txt", b"x", token=token)
    assert (body["code"], body["message"]) == (403, PERMISSION_DENIED)
    assert not (root / "new.txt").exists()


@pytest.mark.parametrize(
    "path", ["/local/../escape.txt", "/local/%2e%2e/escape.txt", "/local/..\\escape.txt"]
)
async def test_put_cannot_escape(admin: Api, root: Path, path: str) -> None:
    response = await admin.client.put(
        "/api/fs/put",
        content=b"x",
        headers={"File-Path": path, "Authorization": admin.token},
    )
    assert response.json()["code"] in (400, 403)
    assert not (root.parent / "escape.txt").exists()
    assert not (root / "escape.txt").exists()


async def test_put_stays_inside_the_base_path(admin: Api, root: Path) -> None:
    token = await user_token(admin, permission=int(Perm.WRITE), base_path="/local/sub")
    body = await put(admin, "/../a.txt", b"evil", token=token)
    assert body["code"] in (400, 403)
    body = await put(admin, "/inside.txt", b"ok", token=token)
    assert body["code"] == 200, body
    assert (root / "sub/inside.txt").read_bytes() == b"ok"
    assert (root / "a.txt").read_text() == "alpha"


async def test_form_upload(admin: Api, root: Path) -> None:
    response = await admin.client.put(
        "/api/fs/form",
        files={"file": ("ignored.bin", b"\x00form-bytes\xff", "application/octet-stream")},
        headers={"File-Path": quote("/local/new folder/f.bin"), "Authorization": admin.token},
    )
    body = response.json()
    assert body["code"] == 200, body
    assert (root / "new folder/f.bin").read_bytes() == b"\x00form-bytes\xff"
    response = await admin.client.put(
        "/api/fs/form",
        files={"other": ("x", b"x")},
        headers={"File-Path": "/local/missing.bin", "Authorization": admin.token},
    )
    assert response.json()["code"] == 500
    assert not (root / "missing.bin").exists()


MALFORMED_FORMS = {
    "a part header without a colon": (
        "B",
        b"--B\r\nGarbage\r\n\r\nabc\r\n--B--\r\n",
    ),
    "a part header of a megabyte": (
        "B",
        b'--B\r\nContent-Disposition: form-data; name="file"; filename="'
        + b"a" * (1 << 20)
        + b'"\r\n\r\nabc\r\n--B--\r\n',
    ),
    "a boundary of 5,000 bytes": ("a" * 5000, b"--" + b"a" * 5000 + b"\r\n"),
}


@pytest.mark.parametrize("boundary,body", MALFORMED_FORMS.values(), ids=MALFORMED_FORMS.keys())
async def test_form_answers_400_to_a_body_the_parser_refuses(
    admin: Api, root: Path, boundary: str, body: bytes
) -> None:
    response = await admin.client.put(
        "/api/fs/form",
        content=body,
        headers={
            "File-Path": "/local/bad.bin",
            "Authorization": admin.token,
            "Content-Type": f"multipart/form-data; boundary={boundary}",
        },
    )
    assert response.json()["code"] == 400, response.text
    assert not (root / "bad.bin").exists()
    assert leftovers(root) == []


async def test_link_is_for_admins(admin: Api, root: Path) -> None:
    body = await admin.post("/api/fs/link", {"path": "/local/a.txt"})
    assert body["code"] == 200, body
    assert "/p/local/a.txt?d&sign=" in body["data"]["url"]
    url = urlsplit(body["data"]["url"])
    fetched = await admin.client.get(f"{url.path}?{url.query}")
    assert (fetched.status_code, fetched.content) == (200, b"alpha")
    token = await user_token(admin, permission=0xFFFF)
    body = await admin.post("/api/fs/link", {"path": "/local/a.txt"}, token=token)
    assert body["code"] == 403


async def test_form_streams_a_large_part_among_other_fields(admin: Api, root: Path) -> None:
    data = os.urandom(3 << 20)
    response = await admin.client.put(
        "/api/fs/form",
        data={"before": "x" * 100},
        files={"file": ("f.bin", data, "application/octet-stream"), "later": ("l", b"later")},
        headers={"File-Path": "/local/big.bin", "Authorization": admin.token},
    )
    assert response.json()["code"] == 200, response.text
    assert (root / "big.bin").read_bytes() == data


async def test_form_refuses_other_bodies_and_cut_parts(admin: Api, root: Path) -> None:
    response = await admin.client.put(
        "/api/fs/form",
        content=b"not multipart",
        headers={
            "File-Path": "/local/x.bin",
            "Authorization": admin.token,
            "Content-Type": "text/plain",
        },
    )
    assert response.json()["code"] == 400
    cut = b'--B\r\nContent-Disposition: form-data; name="file"; filename="f"\r\n\r\npartial'
    response = await admin.client.put(
        "/api/fs/form",
        content=cut,
        headers={
            "File-Path": "/local/cut.bin",
            "Authorization": admin.token,
            "Content-Type": "multipart/form-data; boundary=B",
        },
    )
    assert response.json()["code"] == 400
    assert not (root / "x.bin").exists() and not (root / "cut.bin").exists()
    assert leftovers(root) == []


async def test_a_folder_password_in_utf_8_is_taken_from_the_upload_header(
    admin: Api, root: Path
) -> None:
    # AList's clients send the Password header's UTF-8 bytes as they are.
    await add_meta(admin, "/local/sub", password="пароль", p_sub=True, write=True, w_sub=True)
    token = await user_token(admin, permission=0)
    sent = {"File-Path": quote("/local/sub/new.txt"), "Authorization": token,
            "Password": "пароль".encode()}  # fmt: skip
    response = await admin.client.put("/api/fs/put", content=b"x", headers=sent)
    assert response.json()["code"] == 200, response.text
    assert (root / "sub/new.txt").read_bytes() == b"x"
