"""No write request changes anything outside the storage roots or a user's base path.

Under ``tmp_path``: ``root/`` is a Local storage at ``/local`` and ``second/`` one at
``/second``; ``outside/`` and ``etc/`` form the sentinel tree, whose files carry a
unique marker; ``data/`` is the server's own state and is left out of every snapshot.
Symlinks inside the roots point into the sentinel tree: absolute, relative and
dangling ones, to files and to folders. The user ``confined`` has every write bit
and the base path ``/local/sub``, which holds the same entries as the root.

Every attempt goes through every write endpoint and field, as the admin and as the
confined user. Around each one the whole tree is snapshotted (listing, contents,
link targets, modes and mtimes): a refused attempt must leave it identical and
answer 400, 403 or 500, never 200. Attempts that only name something inside (a
literal ``%2e%2e`` folder, a host path below the base path) may succeed, but may
change nothing outside the root or the base path.

At the end: a relative link that the confined user moves up a level comes to point
outside the base path (though still inside the root); following it is refused.
"""

from __future__ import annotations

import asyncio
import os
import secrets
import stat
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest

from manifold.container import Services
from manifold.models import TaskState
from tests.api.fs_helpers import make_tree, mount_local
from tests.conftest import Api

MARKER = "SENTINEL-" + secrets.token_hex(8)
CONFINED_PW = "confined-password-1"
PAYLOAD = b"uploaded-bytes"
# Only a guard against a hang; nothing depends on how fast a task runs.
TASK_WAIT = 30.0

WHO = ["admin", "confined"]
# How each user spells its home folder (a virtual path) and where that lies on disk.
HOME = {"admin": "/local", "confined": ""}
HOME_DIR = {"admin": "root", "confined": "root/sub"}

HOME_FILES: dict[str, bytes | str] = {
    "a.txt": "alpha",
    "deeper/c.txt": "gamma",
    "empty/": "",
    "hollow/x/y/": "",
}
LINKS = ["evil_file", "evil_dir", "evil_hollow", "dangle", "rel_out"]

Snapshot = dict[str, tuple[object, ...]]


# --- the world ----------------------------------------------------------------------


@dataclass
class World:
    api: Api
    services: Services
    tmp: Path
    tokens: dict[str, str]

    def snapshot(self) -> Snapshot:
        return snapshot(self.tmp, skip={self.tmp / "data"})


def build_tree(tmp: Path) -> None:
    outside = make_tree(
        tmp / "outside",
        {
            "secret.txt": MARKER,
            "dir/inner.txt": MARKER,
            "dir/a.txt": MARKER,
            "dir/empty/": "",
            "hollow/a/b/": "",
        },
    )
    make_tree(tmp / "etc", {"passwd": MARKER})
    root = make_tree(tmp / "root", HOME_FILES)
    make_tree(root / "sub", HOME_FILES)
    for home, depth in ((root, 1), (root / "sub", 2)):
        (home / "evil_file").symlink_to(outside / "secret.txt")
        (home / "evil_dir").symlink_to(outside / "dir", target_is_directory=True)
        (home / "evil_hollow").symlink_to(outside / "hollow", target_is_directory=True)
        (home / "dangle").symlink_to(outside / "not-yet")
        (home / "rel_out").symlink_to("../" * depth + "outside/dir", target_is_directory=True)
        # A folder that holds links out, for the requests that walk, copy or remove it.
        (home / "nest").mkdir()
        (home / "nest/evil_dir").symlink_to(outside / "dir", target_is_directory=True)
        (home / "nest/rel_out").symlink_to("../" * (depth + 1) + "outside/dir")
    second = make_tree(tmp / "second", {"s.txt": "second"})
    (second / "evil_dir").symlink_to(outside / "dir", target_is_directory=True)


@pytest.fixture
async def world(api: Api, services: Services, tmp_path: Path) -> AsyncIterator[World]:
    build_tree(tmp_path)
    await api.as_admin()
    await mount_local(api, "/local", tmp_path / "root")
    await mount_local(api, "/second", tmp_path / "second")
    await api.make_user("confined", CONFINED_PW, base_path="/local/sub", permission=0x30FF)
    if services.writer.tasks is None:
        # Copies across storages run as tasks; wire them up where the container does not yet.
        services.writer.tasks = services.tasks
        services.transfers.register(services.tasks)
    tokens = {"admin": api.token, "confined": await api.login("confined", CONFINED_PW)}
    yield World(api, services, tmp_path, tokens)


def snapshot(top: Path, skip: set[Path]) -> Snapshot:
    """Every entry below ``top``: its kind, mode, mtime, and content or link target."""
    seen: Snapshot = {}
    for folder, dirs, files in os.walk(top):
        here = Path(folder)
        dirs[:] = [d for d in dirs if here / d not in skip]
        for name in dirs + files:
            path = here / name
            st = path.lstat()
            rel = path.relative_to(top).as_posix()
            if stat.S_ISLNK(st.st_mode):
                seen[rel] = ("link", os.readlink(path))
            elif stat.S_ISDIR(st.st_mode):
                seen[rel] = ("dir", st.st_mode, st.st_mtime_ns)
            else:
                seen[rel] = ("file", st.st_mode, st.st_mtime_ns, path.read_bytes())
    return seen


def outside_of(snap: Snapshot, *allowed: str) -> Snapshot:
    """The entries that are neither one of the ``allowed`` folders nor below one."""
    return {
        rel: entry
        for rel, entry in snap.items()
        if not any(rel == a or rel.startswith(a + "/") for a in allowed)
    }


def describe(before: Snapshot, after: Snapshot) -> str:
    added = sorted(after.keys() - before.keys())
    removed = sorted(before.keys() - after.keys())
    changed = sorted(k for k in before.keys() & after.keys() if before[k] != after[k])
    return f"added {added}, removed {removed}, changed {changed}"


# --- requests -----------------------------------------------------------------------


@dataclass(frozen=True)
class Json:
    route: str
    body: dict[str, Any]


@dataclass(frozen=True)
class Upload:
    route: str  # "put" or "form"
    file_path: str
    headers: tuple[tuple[str, str], ...] = ()


Request = Json | Upload


def fill(value: Any, tmp: Path) -> Any:
    """``value`` with ``{tmp}`` replaced by the test's temporary folder, at any depth."""
    if isinstance(value, str):
        return value.replace("{tmp}", str(tmp))
    if isinstance(value, list):
        return [fill(v, tmp) for v in value]
    if isinstance(value, dict):
        return {k: fill(v, tmp) for k, v in value.items()}
    return value


async def send(world: World, who: str, request: Request) -> dict[str, Any]:
    token = world.tokens[who]
    if isinstance(request, Json):
        body = fill(request.body, world.tmp)
        return await world.api.post(f"/api/fs/{request.route}", body, token=token)
    headers = {
        "File-Path": fill(request.file_path, world.tmp),
        "Authorization": token,
        **dict(request.headers),
    }
    client = world.api.client
    if request.route == "put":
        response = await client.put("/api/fs/put", content=PAYLOAD, headers=headers)
    else:
        files = {"file": ("../../escape.txt", PAYLOAD, "application/octet-stream")}
        response = await client.put("/api/fs/form", files=files, headers=headers)
    assert response.status_code == 200, (request, response.status_code, response.text)
    answer: dict[str, Any] = response.json()
    assert set(answer) == {"code", "message", "data"}, answer
    return answer


async def settle(world: World) -> None:
    """Wait until no copy or upload task is left unfinished, spawned ones included."""
    admin = await world.services.users.by_name("admin")
    assert admin is not None
    tasks = world.services.tasks
    for _ in range(100):
        pending = [t for kind in ("copy", "upload") for t in await tasks.undone(kind, admin)]
        if not pending:
            return
        for task in pending:
            await asyncio.wait_for(tasks.wait_done(task.id), TASK_WAIT)
    raise AssertionError("tasks kept spawning")


REFUSED = "refused"  # an error code, and nothing anywhere changed
NOOP = "noop"  # any code, and nothing anywhere changed
TASK = "task"  # nothing changed; a task it answers with must fail


async def check(world: World, who: str, request: Request, expect: str) -> str | None:
    """What went wrong with one attempt, or None."""
    before = world.snapshot()
    answer = await send(world, who, request)
    await settle(world)
    after = world.snapshot()
    problems = []
    if MARKER in str(answer):
        problems.append("the answer holds the sentinel's marker")
    if expect == REFUSED and answer["code"] not in (400, 403, 500):
        problems.append(f"answered {answer['code']}")
    if expect == TASK and answer["code"] == 200:
        for task in answer["data"]["tasks"]:
            state = world.services.tasks.get(task["id"]).state
            if state != TaskState.FAILED:
                problems.append(f"task {task['name']} ended in state {state}")
    if after != before:
        problems.append(describe(before, after))
    if not problems:
        return None
    return f"{who} {request!r} -> {answer['code']} {answer['message']!r}: {'; '.join(problems)}"


async def check_all(world: World, who: str, cases: list[tuple[Request, str]]) -> None:
    failures = [f for request, expect in cases if (f := await check(world, who, request, expect))]
    assert not failures, "\n".join(failures)


# --- the table ----------------------------------------------------------------------


def dotdot_paths(h: str) -> list[str]:
    """Every spelling of ``..``, backslash and NUL that a JSON path field can carry."""
    return [
        "..",
        "../",
        "/..",
        "/../",
        "../outside",
        "/../outside/dir",
        "../../etc/passwd",
        f"{h}/..",
        f"{h}/../..",
        f"{h}/../../outside",
        f"{h}/deeper/..",
        f"{h}/deeper/../../outside/dir",
        f"{h}/deeper/../../../etc",
        f"{h}/./../outside",
        f"{h}//..//..//outside",
        f"{h}/deeper/./../../outside",
        "..\\outside",
        "\\..\\..\\outside",
        f"{h}\\..\\..\\outside",
        f"{h}/deeper\\..\\..\\..\\outside",
        f"{h}/..\\..\\outside",
        f"{h}/\x00",
        f"{h}/deeper\x00",
        f"{h}/\x00/../../outside",
        f"{h}/a.txt\x00/../../outside",
    ]


def link_paths(h: str) -> list[str]:
    """Paths through the symlinks that lead out of the root."""
    return [
        f"{h}/evil_file",
        f"{h}/evil_file/new",
        f"{h}/evil_dir",
        f"{h}/evil_dir/new",
        f"{h}/evil_dir/empty",
        f"{h}/evil_hollow",
        f"{h}/evil_hollow/a",
        f"{h}/dangle",
        f"{h}/dangle/new",
        f"{h}/rel_out",
        f"{h}/rel_out/empty",
    ]


ADMIN_ONLY_PATHS = [
    "{tmp}/outside/dir",
    "{tmp}/outside/new",
    "/outside",
    "/etc/passwd",
    "/localx/new",
    "/local/sub/evil_dir/new",
    "/local/sub/rel_out/new",
    "/second/evil_dir",
    "/second/evil_dir/new",
    "/second/../local/new",
]


def bad_paths(who: str) -> list[str]:
    h = HOME[who]
    extra = ADMIN_ONLY_PATHS if who == "admin" else []
    return [*dotdot_paths(h), *link_paths(h), *extra]


# Names that are not one segment: each must be refused before anything acts.
BAD_NAMES = [
    "..",
    ".",
    "../",
    "./..",
    "../outside",
    "../../outside/secret.txt",
    "../../../etc/passwd",
    "..\\outside",
    "..\\..\\outside",
    "a/b",
    "deeper/../..",
    "a.txt/../..",
    "/",
    "/outside",
    "{tmp}/outside/secret.txt",
    "\\",
    "\x00",
    "a.txt\x00",
    "\x00/../..",
]


def path_requests(h: str, p: str) -> list[Request]:
    """Every write request with the path or folder field ``p``."""
    home = h or "/"
    return [
        Json("mkdir", {"path": p}),
        Json("rename", {"path": p, "name": "renamed"}),
        Json("rename", {"path": p, "name": "renamed", "overwrite": True}),
        Json(
            "batch_rename",
            {
                "src_dir": p,
                "rename_objects": [
                    {"src_name": "a.txt", "new_name": "renamed"},
                    {"src_name": "inner.txt", "new_name": "renamed2"},
                ],
            },
        ),
        Json(
            "regex_rename",
            {"src_dir": p, "src_name_regex": "^(.*)$", "new_name_regex": "renamed-$1"},
        ),
        Json("move", {"src_dir": p, "dst_dir": f"{h}/empty", "names": ["a.txt", "inner.txt"]}),
        Json("move", {"src_dir": home, "dst_dir": p, "names": ["a.txt"]}),
        Json("move", {"src_dir": home, "dst_dir": p, "names": ["a.txt"], "overwrite": True}),
        Json("copy", {"src_dir": p, "dst_dir": f"{h}/empty", "names": ["a.txt", "inner.txt"]}),
        Json("copy", {"src_dir": home, "dst_dir": p, "names": ["a.txt"]}),
        Json("copy", {"src_dir": home, "dst_dir": p, "names": ["a.txt"], "overwrite": True}),
        Json(
            "recursive_move",
            {"src_dir": p, "dst_dir": f"{h}/empty", "conflict_policy": "overwrite"},
        ),
        Json(
            "recursive_move",
            {"src_dir": f"{h}/deeper", "dst_dir": p, "conflict_policy": "overwrite"},
        ),
        Json("remove", {"dir": p, "names": ["a.txt", "inner.txt", "secret.txt"]}),
        Json("remove_empty_directory", {"src_dir": p}),
    ]


def name_requests(h: str, n: str, lead: bool) -> list[Request]:
    """Every write request with ``n`` as a name; ``lead`` puts a valid name before it.

    With a valid name first, nothing may act on it either: every name is checked
    before the first change. Names that only the storage can refuse (the symlinks)
    go alone, since AList's order (change one by one, stop at the first error) is
    kept for those.
    """
    home = h or "/"
    first = ["a.txt"] if lead else []
    pairs = [{"src_name": "a.txt", "new_name": "fine.txt"}] if lead else []
    requests: list[Request] = [
        Json("rename", {"path": f"{h}/a.txt", "name": n}),
        Json("rename", {"path": f"{h}/a.txt", "name": n, "overwrite": True}),
        Json("rename", {"path": f"{h}/{n}", "name": "renamed"}),
        Json("move", {"src_dir": home, "dst_dir": f"{h}/empty", "names": [*first, n]}),
        Json(
            "move",
            {"src_dir": home, "dst_dir": f"{h}/empty", "names": [*first, n], "overwrite": True},
        ),
        Json("copy", {"src_dir": home, "dst_dir": f"{h}/empty", "names": [*first, n]}),
        Json(
            "copy",
            {"src_dir": home, "dst_dir": f"{h}/empty", "names": [*first, n], "overwrite": True},
        ),
        Json("remove", {"dir": home, "names": [*first, n]}),
    ]
    if n:  # batch_rename skips a pair with an empty side, as AList does
        requests += [
            Json(
                "batch_rename",
                {"src_dir": home, "rename_objects": [*pairs, {"src_name": n, "new_name": "x"}]},
            ),
            Json(
                "batch_rename",
                {
                    "src_dir": home,
                    "rename_objects": [*pairs, {"src_name": "deeper", "new_name": n}],
                },
            ),
        ]
    return requests


# (src_name_regex, new_name_regex): each turns a visible name into a bad one.
BAD_TEMPLATES = [
    (r"^(a)\.txt$", "../$1"),
    (r"^(a)\.txt$", "../../outside/$1.txt"),
    (r"^(a\.txt)$", "$1/../../escape"),
    (r"^(a\.txt)$", "x/$1"),
    (r"^a\.txt$", "../$0"),
    (r"^(a\.txt)$", ".."),
    (r"^(a\.txt)$", "."),
    (r"^(a\.txt)$", "/"),
    (r"^(a)\.txt$", "..\\$1"),
    (r"^(a)\.txt$", "${1}\\..\\..\\x"),
    (r"^(a)\.txt$", "$1\x00"),
    (r"\.txt$", "/../../x"),
    (r"^(?P<n>a)\.txt$", "../${n}"),
    (r"^(.*)$", "../${1}"),
    (r"(a)", "$1/"),
    (r"^(deeper)$", "../../outside/$1"),
    (r"^(deeper)$", "$1/.."),
    (r"^(.)", ".$1/."),
]


def regex_requests(h: str) -> list[tuple[Request, str]]:
    home = h or "/"
    cases: list[tuple[Request, str]] = [
        (
            Json(
                "regex_rename",
                {"src_dir": home, "src_name_regex": pattern, "new_name_regex": template},
            ),
            REFUSED,
        )
        for pattern, template in BAD_TEMPLATES
    ]
    # The links are not listed, so no regex reaches them: nothing happens at all.
    hidden = Json(
        "regex_rename",
        {
            "src_dir": home,
            "src_name_regex": "^(evil_.*|dangle|rel_out)$",
            "new_name_regex": "x$1",
        },
    )
    return [*cases, (hidden, NOOP)]


def upload_paths(who: str) -> list[str]:
    """``File-Path`` values as sent: the server URL-unescapes them once."""
    h = HOME[who]
    paths = [
        "../escape.txt",
        "/../escape.txt",
        f"{h}/../escape.txt",
        f"{h}/deeper/../../escape.txt",
        f"{h}/%2e%2e/escape.txt",
        f"{h}/%2E%2E/escape.txt",
        f"{h}/.%2e/escape.txt",
        f"{h}/%2e./escape.txt",
        "%2e%2e/%2e%2e/escape.txt",
        f"{h}/..%2fescape.txt",
        f"{h}/..%2F..%2Fescape.txt",
        f"{h}%2f..%2f..%2fescape.txt",
        f"{h}/deeper/%2e%2e/%2e%2e/escape.txt",
        f"{h}/..%5cescape.txt",
        f"{h}/..\\escape.txt",
        f"{h}\\..\\..\\escape.txt",
        f"{h}/%5c..%5c..%5cescape.txt",
        f"{h}/escape.txt%00",
        f"{h}/%00/../escape.txt",
        f"{h}/a.txt%00.png",
        f"{h}/%c0%ae%c0%ae/escape.txt",
        f"{h}/%c0%2e%c0%2e/escape.txt",
        f"{h}/%e0%80%ae%e0%80%ae/escape.txt",
        f"{h}/%ff/escape.txt",
        f"{h}/..",
        f"{h}/%2e%2e",
        f"{h}/.",
        f"{h}/%2e",
        f"{h}/",
        "",
        "/",
        "..",
        f"{h}/evil_dir/escape.txt",
        f"{h}/evil_dir/inner.txt",
        f"{h}/evil_dir/new/escape.txt",
        f"{h}/evil_dir%2fescape.txt",
        f"{h}/evil_file",
        f"{h}/evil_file/escape.txt",
        f"{h}/dangle",
        f"{h}/dangle/escape.txt",
        f"{h}/rel_out/escape.txt",
        f"{h}/rel_out/inner.txt",
        f"{h}/evil_hollow/a/escape.txt",
    ]
    if who == "admin":
        paths += [
            quote("{tmp}/outside/escape.txt"),
            "{tmp}/outside/dir/inner.txt",
            "/outside/escape.txt",
            "/localx/escape.txt",
            "/local/sub/evil_dir/escape.txt",
            "/second/evil_dir/escape.txt",
            "/second/%2e%2e/local/escape.txt",
        ]
    return paths


UPLOAD_HEADERS: list[tuple[tuple[str, str], ...]] = [
    (),
    (("As-Task", "true"),),
    (("Overwrite", "false"),),
    (("Last-Modified", "1000"),),
]


def upload_requests(who: str, route: str) -> list[Request]:
    return [
        Upload(route, path, headers) for path in upload_paths(who) for headers in UPLOAD_HEADERS
    ]


# Test ids, and what each group of the table drives.
GROUPS = {
    "paths": "path and folder fields of every JSON write endpoint",
    "names": "name fields (rename, batch_rename, move, copy, remove): not one segment",
    "link-names": "name fields naming links out of the root; copies across storages",
    "regex": "regex_rename templates that produce bad names",
    "put": "PUT /api/fs/put File-Path, with and without As-Task, Overwrite, Last-Modified",
    "form": "PUT /api/fs/form File-Path, likewise",
}


def cases_for(who: str, group: str) -> list[tuple[Request, str]]:
    h = HOME[who]
    if group == "paths":
        return [(r, REFUSED) for p in bad_paths(who) for r in path_requests(h, p)]
    if group == "names":
        return [(r, REFUSED) for n in ["", *BAD_NAMES] for r in name_requests(h, n, True)]
    if group == "link-names":
        cases = [(r, REFUSED) for n in LINKS for r in name_requests(h, n, False)]
        if who == "admin":
            # Across storages a copy is a task, as in AList; the task must fail.
            cases += [
                (Json("copy", {"src_dir": "/local", "dst_dir": "/second", "names": [n]}), TASK)
                for n in LINKS
            ]
            cases += [
                (Json("copy", {"src_dir": "/second", "dst_dir": "/local", "names": [n]}), TASK)
                for n in ["evil_dir"]
            ]
        return cases
    if group == "regex":
        return regex_requests(h)
    return [(r, REFUSED) for r in upload_requests(who, group)]


@pytest.mark.parametrize("who", WHO)
@pytest.mark.parametrize("group", list(GROUPS))
async def test_escape_attempts_are_refused_and_change_nothing(
    world: World, who: str, group: str
) -> None:
    cases = cases_for(who, group)
    assert cases
    await check_all(world, who, cases)


def test_the_table_covers_every_write_endpoint_and_field() -> None:
    seen: set[tuple[str, str]] = set()
    for who in WHO:
        for group in GROUPS:
            for request, _ in cases_for(who, group):
                if isinstance(request, Upload):
                    seen.add((request.route, "File-Path"))
                    continue
                for field, value in request.body.items():
                    if field == "rename_objects":
                        seen |= {("batch_rename", f) for pair in value for f in pair}
                    else:
                        seen.add((request.route, field))
    wanted = {
        ("mkdir", "path"),
        ("rename", "path"),
        ("rename", "name"),
        ("batch_rename", "src_dir"),
        ("batch_rename", "src_name"),
        ("batch_rename", "new_name"),
        ("regex_rename", "src_dir"),
        ("regex_rename", "new_name_regex"),
        ("move", "src_dir"),
        ("move", "dst_dir"),
        ("move", "names"),
        ("copy", "src_dir"),
        ("copy", "dst_dir"),
        ("copy", "names"),
        ("recursive_move", "src_dir"),
        ("recursive_move", "dst_dir"),
        ("remove", "dir"),
        ("remove", "names"),
        ("remove_empty_directory", "src_dir"),
        ("put", "File-Path"),
        ("form", "File-Path"),
    }
    assert wanted <= seen, wanted - seen


# --- the snapshot itself --------------------------------------------------------------


def test_the_snapshot_sees_every_kind_of_change(tmp_path: Path) -> None:
    """The comparison the table relies on does fail when something outside changes."""
    build_tree(tmp_path)
    outside = tmp_path / "outside"
    changes = [
        lambda: (outside / "secret.txt").write_text(MARKER + "!"),
        lambda: os.utime(outside / "dir/inner.txt", (1, 1)),
        lambda: (outside / "dir/new").write_text(""),
        lambda: (outside / "dir/empty").rmdir(),
        lambda: (outside / "secret.txt").chmod(0o600),
        lambda: (tmp_path / "escape.txt").write_text(""),
    ]
    for change in changes:
        before = snapshot(tmp_path, skip=set())
        change()
        after = snapshot(tmp_path, skip=set())
        assert after != before
        assert outside_of(after, "root", "second") != outside_of(before, "root", "second")
    (tmp_path / "root/rel_out").unlink()
    (tmp_path / "root/rel_out").symlink_to("../etc")
    assert snapshot(tmp_path, skip=set())["root/rel_out"] == ("link", "../etc")


async def test_a_write_inside_is_seen_by_the_snapshot(world: World) -> None:
    """A request that does change the tree is told apart from a refused one."""
    failure = await check(world, "confined", Json("mkdir", {"path": "/made"}), REFUSED)
    assert failure is not None
    assert "answered 200" in failure and "root/sub/made" in failure
    assert (world.tmp / "root/sub/made").is_dir()


# --- names that only look like escapes ---------------------------------------------


# (File-Path after the home folder as sent, the path it must land on below home)
LITERAL_UPLOADS = [
    ("/%252e%252e/escape.txt", "%2e%2e/escape.txt"),
    ("/%252E%252E%252fescape.txt", "%2E%2E%2fescape.txt"),
    ("/..%252f..%252fescape.txt", "..%2f..%2fescape.txt"),
    ("/..%255cescape.txt", "..%5cescape.txt"),
    ("/%252e%252e%252f%252e%252e%252fescape2.txt", "%2e%2e%2f%2e%2e%2fescape2.txt"),
    ("/%25%32%65%25%32%65/escape3.txt", "%2e%2e/escape3.txt"),
    ("/escape.txt%2500", "escape.txt%00"),
    ("/.../escape.txt", ".../escape.txt"),
    ("/..%20/escape.txt", ".. /escape.txt"),
    ("/%20../escape.txt", " ../escape.txt"),
    ("/..a/escape.txt", "..a/escape.txt"),
    ("/a..//escape.txt", "a../escape.txt"),
    ("/%EF%BC%8E%EF%BC%8E/escape.txt", "\uff0e\uff0e/escape.txt"),
    ("/%E2%80%A5/escape.txt", "\u2025/escape.txt"),
]


@pytest.mark.parametrize("route", ["put", "form"])
@pytest.mark.parametrize("who", WHO)
async def test_double_encoded_file_path_is_one_literal_name(
    world: World, who: str, route: str
) -> None:
    """``File-Path`` is unescaped once: ``%252e%252e`` is a folder named ``%2e%2e``."""
    home = world.tmp / HOME_DIR[who]
    literals = [(HOME[who] + sent, rel) for sent, rel in LITERAL_UPLOADS]
    if who == "confined":
        # A host path is a path below the user's base path like any other.
        literals.append(
            (quote(f"{world.tmp}/outside/escape.txt"), f"{world.tmp}/outside/escape.txt")
        )
    before = outside_of(world.snapshot(), HOME_DIR[who])
    for sent, rel in literals:
        answer = await send(world, who, Upload(route, sent))
        assert answer["code"] == 200, (sent, answer)
        assert (home / rel.lstrip("/")).read_bytes() == PAYLOAD, sent
    after = outside_of(world.snapshot(), HOME_DIR[who])
    assert after == before, describe(before, after)


# (route, body, what must exist below home afterwards)
LITERAL_JSON = [
    ("mkdir", {"path": "{h}/%2e%2e/new"}, "%2e%2e/new"),
    ("mkdir", {"path": "{h}/..%2f..%2fnew"}, "..%2f..%2fnew"),
    ("mkdir", {"path": "{h}/.../new"}, ".../new"),
    ("mkdir", {"path": "{h}/.. /new"}, ".. /new"),
    ("mkdir", {"path": "{h}/%5c..%5c"}, "%5c..%5c"),
    ("mkdir", {"path": "{h}/\uff0e\uff0e/new"}, "\uff0e\uff0e/new"),
    ("mkdir", {"path": "{h}/\u2025/new"}, "\u2025/new"),
    ("rename", {"path": "{h}/a.txt", "name": "%2E%2e"}, "%2E%2e"),
    ("rename", {"path": "{h}/deeper", "name": "...."}, "...."),
    ("rename", {"path": "{h}/.../new", "name": "..%2f"}, ".../..%2f"),
]


@pytest.mark.parametrize("who", WHO)
async def test_encoded_dots_in_json_are_literal_names(world: World, who: str) -> None:
    home = world.tmp / HOME_DIR[who]
    before = outside_of(world.snapshot(), HOME_DIR[who])
    cases = [
        (route, {k: v.replace("{h}", HOME[who]) for k, v in body.items()}, rel)
        for route, body, rel in LITERAL_JSON
    ]
    if who == "confined":
        cases.append(("mkdir", {"path": "{tmp}/outside/new"}, "{tmp}/outside/new"))
    for route, body, rel in cases:
        answer = await send(world, who, Json(route, body))
        assert answer["code"] == 200, (route, body, answer)
        assert os.path.lexists(home / fill(rel, world.tmp).lstrip("/")), (route, body)
    after = outside_of(world.snapshot(), HOME_DIR[who])
    assert after == before, describe(before, after)


async def test_form_part_filename_is_ignored(world: World) -> None:
    """Only ``File-Path`` names the target; the part's own filename does not."""
    answer = await send(world, "confined", Upload("form", "/kept.bin"))
    assert answer["code"] == 200, answer
    assert (world.tmp / "root/sub/kept.bin").read_bytes() == PAYLOAD
    assert not (world.tmp / "escape.txt").exists()
    assert not (world.tmp / "root/escape.txt").exists()


# --- legitimate changes over folders that hold links out of the root ------------------


LEGIT_OVER_LINKS = [
    ("remove", {"dir": "{home}", "names": ["deeper", "hollow", "nest"]}),
    ("remove_empty_directory", {"src_dir": "{home}"}),
    ("recursive_move", {"src_dir": "{home}", "dst_dir": "{h}/empty", "conflict_policy": "skip"}),
    ("copy", {"src_dir": "{home}", "dst_dir": "{h}/empty", "names": ["deeper", "nest"]}),
    ("move", {"src_dir": "{home}", "dst_dir": "{h}/empty", "names": ["deeper", "nest"]}),
    ("regex_rename", {"src_dir": "{home}", "src_name_regex": "^(.*)$", "new_name_regex": "r-$1"}),
]


@pytest.mark.parametrize("who", WHO)
@pytest.mark.parametrize(
    "index", range(len(LEGIT_OVER_LINKS)), ids=lambda i: LEGIT_OVER_LINKS[i][0]
)
async def test_legitimate_changes_stay_inside(world: World, who: str, index: int) -> None:
    """Walking, pruning, moving and renaming a home with links out: only home changes."""
    route, template = LEGIT_OVER_LINKS[index]
    h = HOME[who]
    body = {
        k: v.replace("{home}", h or "/").replace("{h}", h) if isinstance(v, str) else v
        for k, v in template.items()
    }
    snap = world.snapshot()
    answer = await send(world, who, Json(route, body))
    assert answer["code"] == 200, answer
    await settle(world)
    after = world.snapshot()
    assert after != snap  # the request did act
    allowed = HOME_DIR[who]
    assert outside_of(after, allowed) == outside_of(snap, allowed), describe(snap, after)
    for link in LINKS:
        assert os.path.islink(world.tmp / allowed / link), link


async def test_removing_a_folder_with_links_out_removes_only_the_links(world: World) -> None:
    before = outside_of(world.snapshot(), "root")
    answer = await world.api.post("/api/fs/remove", {"dir": "/local", "names": ["sub"]})
    assert answer["code"] == 200, answer
    assert not (world.tmp / "root/sub").exists()
    assert outside_of(world.snapshot(), "root") == before


@pytest.mark.parametrize("names", [["sub"], ["a.txt", "deeper", "hollow"]])
async def test_copy_across_storages_stays_inside(world: World, names: list[str]) -> None:
    before = outside_of(world.snapshot(), "root", "second")
    answer = await world.api.post(
        "/api/fs/copy", {"src_dir": "/local", "dst_dir": "/second", "names": names}
    )
    assert answer["code"] == 200, answer
    await settle(world)
    for task in answer["data"]["tasks"]:
        assert world.services.tasks.get(task["id"]).state == TaskState.SUCCEEDED, task
    copied = world.tmp / "second" / names[0]
    assert copied.exists()
    assert outside_of(world.snapshot(), "root", "second") == before
    # Links out of the root are not listed, so a copy made by listing leaves them behind.
    leftover = [p.name for p in (world.tmp / "second").rglob("*") if p.is_symlink()]
    assert leftover == ["evil_dir"]


# --- links that come to point outside after a move or copy --------------------------


def relocating_tree(tmp: Path) -> None:
    """``root/d1/d2/hop`` points at ``root/outside/dir`` (a decoy inside the root).

    Copied or moved up to the root, the same relative link points at the real
    ``outside/dir``.
    """
    make_tree(tmp / "root", {"outside/dir/inner.txt": "decoy", "outside/dir/empty/": ""})
    (tmp / "root/d1/d2").mkdir(parents=True)
    (tmp / "root/d1/d2/hop").symlink_to("../../outside/dir", target_is_directory=True)


THROUGH_HOP = [
    Upload("put", "/local/d2/hop/escape.txt"),
    Upload("put", "/local/d2/hop/inner.txt"),
    Upload("form", "/local/d2/hop/escape.txt"),
    Json("mkdir", {"path": "/local/d2/hop/new"}),
    Json("rename", {"path": "/local/d2/hop/inner.txt", "name": "renamed"}),
    Json("rename", {"path": "/local/d2/hop", "name": "renamed"}),
    Json("move", {"src_dir": "/local/d2/hop", "dst_dir": "/local", "names": ["inner.txt"]}),
    Json("copy", {"src_dir": "/local/d2/hop", "dst_dir": "/local", "names": ["inner.txt"]}),
    Json("copy", {"src_dir": "/local/d2", "dst_dir": "/second", "names": ["hop"]}),
    Json("remove", {"dir": "/local/d2/hop", "names": ["inner.txt", "empty"]}),
    Json("remove_empty_directory", {"src_dir": "/local/d2/hop"}),
    Json("recursive_move", {"src_dir": "/local/d2/hop", "dst_dir": "/local"}),
    Json(
        "batch_rename",
        {
            "src_dir": "/local/d2/hop",
            "rename_objects": [{"src_name": "inner.txt", "new_name": "x"}],
        },
    ),
    Json(
        "regex_rename",
        {"src_dir": "/local/d2/hop", "src_name_regex": ".*", "new_name_regex": "x"},
    ),
]


@pytest.mark.parametrize("route", ["copy", "move"])
async def test_a_relocated_relative_link_is_still_refused(world: World, route: str) -> None:
    relocating_tree(world.tmp)
    answer = await world.api.post(
        f"/api/fs/{route}", {"src_dir": "/local/d1", "dst_dir": "/local", "names": ["d2"]}
    )
    assert answer["code"] == 200, answer
    hop = world.tmp / "root/d2/hop"
    assert hop.resolve() == (world.tmp / "outside/dir").resolve()
    cases = [(r, TASK if r == THROUGH_HOP[8] else REFUSED) for r in THROUGH_HOP]
    await check_all(world, "admin", cases)


# --- the link endpoint (admins only, raw full paths) -------------------------------


LINK_ATTEMPTS = [
    "/local/evil_file",
    "/local/evil_dir/inner.txt",
    "/local/rel_out/inner.txt",
    "/local/dangle",
    "/local/sub/evil_file",
    "/local/../../outside/secret.txt",
    "/local/%2e%2e/%2e%2e/outside/secret.txt",
    "/local\\..\\..\\outside\\secret.txt",
    "/local/a.txt\x00/../../outside/secret.txt",
    "/second/evil_dir/inner.txt",
    "{tmp}/outside/secret.txt",
]


async def test_link_never_reaches_outside(world: World) -> None:
    for path in LINK_ATTEMPTS:
        answer = await world.api.post("/api/fs/link", {"path": fill(path, world.tmp)})
        assert answer["code"] != 200, (path, answer)
        assert MARKER not in str(answer), path
    answer = await send(world, "confined", Json("link", {"path": "/local/a.txt"}))
    assert answer["code"] == 403, answer


# --- a base path left through a link the user relocated -----------------------------


@pytest.mark.parametrize("route", ["copy", "move"])
async def test_confined_user_cannot_leave_the_base_path_through_a_relocated_link(
    world: World, route: str
) -> None:
    """``root/sub/d1/d2/hop -> ../../empty`` points at ``root/sub/empty``: inside.

    Moved or copied up to ``/d2`` by the confined user, the same link points at
    ``root/empty``, outside the base path ``/local/sub`` though inside the root.
    """
    (world.tmp / "root/sub/d1/d2").mkdir(parents=True)
    (world.tmp / "root/sub/d1/d2/hop").symlink_to("../../empty", target_is_directory=True)
    make_tree(world.tmp / "root/empty", {"victim.txt": "victim"})
    answer = await send(
        world, "confined", Json(route, {"src_dir": "/d1", "dst_dir": "/", "names": ["d2"]})
    )
    assert answer["code"] == 200, answer
    assert (world.tmp / "root/sub/d2/hop").resolve() == (world.tmp / "root/empty").resolve()
    cases: list[tuple[Request, str]] = [
        (Upload("put", "/d2/hop/escape.txt"), REFUSED),
        (Upload("put", "/d2/hop/victim.txt"), REFUSED),
        (Json("mkdir", {"path": "/d2/hop/made"}), REFUSED),
        (Json("remove", {"dir": "/d2/hop", "names": ["victim.txt"]}), REFUSED),
    ]
    await check_all(world, "confined", cases)
    for read in ("list", "get", "dirs"):
        answer = await send(world, "confined", Json(read, {"path": "/d2/hop"}))
        assert answer["code"] == 403, (read, answer)
        assert "victim" not in str(answer)
