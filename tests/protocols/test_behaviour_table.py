"""What each operation does, checked on the JSON API, WebDAV, SFTP, FTP, FTPS and S3.

The twin of the permission table: every verb (make a folder, upload, replace, rename,
move, copy, remove, lock) against the situations that lose data when a server gets
them wrong (the destination is the source, lies inside it or holds it; a taken name,
an empty or full folder; a missing parent; a name too long or with a control
character; a link out of the caller's root; a caller without the remove bit). Each row
says what comes of it, in the words of ``behaviour_clients``, and on which protocols
the verb exists; ``differs`` gives a protocol's own answer where the rule book gives
it one. The rule (R1-R11, "-" for the plain working case) groups the rows.

Every case runs in a fresh folder of its own, and after each the disk is compared with
its snapshot from before: every byte that was there and was not the case's target is
still there, nothing was written outside the case's folder, and a refusal changed
nothing at all. One live server (all ports) serves the whole module.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass

import pytest

from tests.protocols.behaviour_clients import Answer, Verbs, open_verbs
from tests.protocols.behaviour_site import Site, Snapshot, bucket_of, live_site, where

ALL = ("api", "dav", "sftp", "ftp", "ftps", "s3")
USERS = ("api", "dav", "sftp", "ftp", "ftps")  # S3 has no users: its keys act as admin
COPYING = ("api", "dav", "s3")
CHOOSING = ("api", "dav", "sftp")  # may keep a taken name: overwrite off, plain rename
NAMING = ("dav", "sftp", "ftp", "ftps")  # move under another name (the API keeps names)
DAV = ("dav",)
API_DAV = ("api", "dav")
N255 = "n" * 251 + ".txt"
N256 = "n" * 252 + ".txt"
CONTROL = "bad\x01.txt"
PAYLOAD = b"new bytes"


@dataclass(frozen=True)
class Case:
    rule: str
    id: str
    verb: str  # mkdir, upload, replace, rename, move, copy, remove, lock
    src: str  # what rename, move and copy take, in the case's folder
    dst: str  # the path acted on ("" is the case's folder itself)
    outcome: str  # ok, no-op, exists, overlap, denied, bad-name, missing(-parent), outside
    on: tuple[str, ...]
    who: str  # plain, keeper (no remove bit), based (root /local/home, a link out)
    overwrite: bool
    differs: dict[str, str]  # protocol: its outcome

    def expected(self, protocol: str) -> str:
        """The row's outcome, or the protocol's own; FTPS answers as FTP does."""
        ftp = self.differs.get("ftp", self.outcome)
        return self.differs.get(protocol, ftp if protocol == "ftps" else self.outcome)


NAMES = {"<255>": N255, "<256>": N256, "<ctl>": CONTROL}


def C(
    rule: str,
    id: str,
    action: str,
    outcome: str,
    on: tuple[str, ...] = USERS,
    who: str = "plain",
    keep: bool = False,
    **differs: str,
) -> Case:
    """A row: ``action`` is "verb path" or "verb src -> dst"; ``keep`` asks not to
    replace a taken name (API overwrite false, WebDAV Overwrite: F, SFTP's plain rename)."""
    verb, _, paths = action.partition(" ")
    src, _, dst = paths.rpartition(" -> ")
    src, dst = (NAMES.get(p, p) for p in (src, dst))
    return Case(rule, id, verb, src, "" if dst == "." else dst, outcome, on, who, not keep, differs)


CASES = [
    # Make a folder.
    C("-", "mkdir-free", "mkdir new", "ok"),
    C("R6", "mkdir-on-folder", "mkdir empty", "exists", api="ok"),
    C("R6", "mkdir-on-file", "mkdir f.txt", "exists"),
    C("R7", "mkdir-missing-parent", "mkdir no/new", "missing-parent", api="ok"),
    C("R8", "mkdir-256", "mkdir <256>", "bad-name"),
    C("R8", "mkdir-255", "mkdir <255>", "ok"),
    C("R9", "mkdir-control", "mkdir <ctl>", "bad-name"),
    C("R10", "mkdir-outside", "mkdir out/new", "outside", who="based"),
    C("R11", "mkdir-no-remove", "mkdir new", "ok", who="keeper"),
    # Upload to a free name.
    C("-", "upload-free", "upload new.txt", "ok", ALL),
    C("R7", "upload-missing-parent", "upload no/new.txt", "missing-parent", ALL, api="ok", s3="ok"),
    C("R8", "upload-256", "upload <256>", "bad-name", ALL),
    C("R8", "upload-255", "upload <255>", "ok", ALL),
    C("R9", "upload-control", "upload <ctl>", "bad-name", ALL),
    C("R10", "upload-outside", "upload out/new.txt", "outside", ALL, who="based"),
    C("R11", "upload-no-remove", "upload new.txt", "ok", who="keeper"),
    # Upload over what is there.
    C("R4", "replace-file", "replace f.txt", "ok", ALL),
    C("R4", "replace-file-keep", "replace f.txt", "exists", ("api",), keep=True),
    C("R4", "replace-zero-no-remove", "replace zero.txt", "ok", who="keeper"),
    C("R11", "replace-file-no-remove", "replace f.txt", "denied", who="keeper"),
    C("R5", "replace-empty-folder", "replace empty", "exists", ALL),
    C("R5", "replace-full-folder", "replace sub", "exists", ALL),
    C("R10", "replace-outside", "replace out/secret.txt", "outside", ALL, who="based"),
    # Rename within a folder.
    C("-", "rename-free", "rename f.txt -> f2.txt", "ok"),
    C("R1", "rename-self", "rename f.txt -> f.txt", "no-op", dav="denied"),
    C("R4", "rename-onto-file", "rename f.txt -> other.txt", "ok"),
    C("R4", "rename-onto-file-keep", "rename f.txt -> other.txt", "exists", CHOOSING, keep=True),
    C("R4", "rename-onto-zero-no-remove", "rename f.txt -> zero.txt", "ok", who="keeper"),
    C("R11", "rename-onto-file-no-remove", "rename f.txt -> other.txt", "denied", who="keeper"),
    C("R5", "rename-file-onto-empty-folder", "rename f.txt -> empty", "exists", dav="ok"),
    C("R5", "rename-file-onto-full-folder", "rename f.txt -> sub", "exists", dav="ok"),
    C("R5", "rename-folder-onto-file", "rename sub -> other.txt", "exists", dav="ok"),
    C("R5", "rename-folder-onto-folder", "rename sub -> empty", "exists", dav="ok"),
    C(
        "R11",
        "rename-folders-no-remove",
        "rename sub -> empty",
        "exists|denied",
        who="keeper",
        dav="denied",
    ),
    C("R8", "rename-256", "rename f.txt -> <256>", "bad-name"),
    C("R8", "rename-255", "rename f.txt -> <255>", "ok"),
    C("R9", "rename-control", "rename f.txt -> <ctl>", "bad-name"),
    C("R10", "rename-outside", "rename out/secret.txt -> out/moved.txt", "outside", who="based"),
    C("R11", "rename-no-remove", "rename f.txt -> f2.txt", "ok", who="keeper"),
    # Move to another folder (the API's move keeps the name).
    C("-", "move-free", "move f.txt -> empty/f.txt", "ok"),
    C("R1", "move-self", "move f.txt -> f.txt", "no-op", ("api",)),
    C("R2", "move-into-itself", "move sub -> sub/deeper/sub", "overlap"),
    C("R3", "move-onto-parent", "move sub/sub -> sub", "overlap"),
    C("R3", "move-onto-parent-keep", "move sub/sub -> sub", "overlap|exists", CHOOSING, keep=True),
    C("R3", "move-onto-grandparent", "move sub/deeper/h.txt -> sub", "overlap", NAMING),
    C("R3", "move-folder-onto-parent", "move sub/deeper -> sub", "overlap", NAMING),
    C("R3", "move-onto-own-folder", "move sub -> .", "overlap", NAMING),
    C("R4", "move-onto-file", "move f.txt -> sub/f.txt", "ok"),
    C("R4", "move-onto-file-keep", "move f.txt -> sub/f.txt", "exists", CHOOSING, keep=True),
    C("R4", "move-onto-zero-no-remove", "move f.txt -> zeros/f.txt", "ok", who="keeper"),
    C("R11", "move-onto-file-no-remove", "move f.txt -> sub/f.txt", "denied", who="keeper"),
    C("R5", "move-onto-empty-folder", "move f.txt -> box/f.txt", "exists", dav="ok"),
    C("R5", "move-onto-full-folder", "move f.txt -> crate/f.txt", "exists", dav="ok"),
    # AList's move and copy want the destination folder there.
    C("R7", "move-missing-parent", "move f.txt -> no/f.txt", "missing-parent", api="missing"),
    C("R10", "move-out", "move f.txt -> out/f.txt", "outside", who="based"),
    C("R10", "move-in", "move out/secret.txt -> secret.txt", "outside", who="based"),
    C("R11", "move-no-remove", "move f.txt -> empty/f.txt", "ok", who="keeper"),
    # Copy (the API's copy keeps the name).
    C("-", "copy-free", "copy f.txt -> empty/f.txt", "ok", COPYING),
    C("R1", "copy-self", "copy f.txt -> f.txt", "no-op", COPYING, dav="denied", s3="exists"),
    C("R2", "copy-into-itself", "copy sub -> sub/deeper/sub", "overlap", API_DAV),
    C("R3", "copy-onto-parent", "copy sub/sub -> sub", "overlap", COPYING),
    C("R3", "copy-onto-own-folder", "copy f.txt -> .", "overlap", ("dav",)),
    C("R3", "copy-folder-onto-parent", "copy sub/deeper -> sub", "overlap", ("dav",)),
    C("R4", "copy-onto-file", "copy f.txt -> sub/f.txt", "ok", COPYING),
    C("R4", "copy-onto-file-keep", "copy f.txt -> sub/f.txt", "exists", API_DAV, keep=True),
    C("R4", "copy-onto-zero-no-remove", "copy f.txt -> zeros/f.txt", "ok", API_DAV, who="keeper"),
    C(
        "R11",
        "copy-onto-file-no-remove",
        "copy f.txt -> sub/f.txt",
        "denied",
        API_DAV,
        who="keeper",
    ),
    C("R5", "copy-onto-empty-folder", "copy f.txt -> box/f.txt", "exists", COPYING, dav="ok"),
    C("R5", "copy-onto-full-folder", "copy f.txt -> crate/f.txt", "exists", COPYING, dav="ok"),
    C(
        "R7",
        "copy-missing-parent",
        "copy f.txt -> no/f.txt",
        "ok",
        COPYING,
        api="missing",
        dav="missing-parent",
    ),
    C("R8", "copy-256", "copy f.txt -> <256>", "bad-name", ("dav", "s3")),
    C("R9", "copy-control", "copy f.txt -> <ctl>", "bad-name", ("dav", "s3")),
    C("R10", "copy-out", "copy f.txt -> out/f.txt", "outside", COPYING, who="based"),
    C("R10", "copy-in", "copy out/secret.txt -> secret.txt", "outside", COPYING, who="based"),
    C("R11", "copy-no-remove", "copy f.txt -> empty/f.txt", "ok", API_DAV, who="keeper"),
    # Remove.
    C("-", "remove-file", "remove f.txt", "ok", ALL),
    C("-", "remove-empty-folder", "remove empty", "ok", ALL),
    C("-", "remove-full-folder", "remove sub", "ok", ALL, sftp="not-empty", s3="no-op"),
    C("-", "remove-missing", "remove nothing.txt", "missing", ALL, api="no-op", s3="no-op"),
    C("R10", "remove-outside", "remove out/secret.txt", "outside", ALL, who="based"),
    C("R11", "remove-no-remove", "remove f.txt", "denied", who="keeper"),
    C("R11", "remove-folder-no-remove", "remove empty", "denied", who="keeper"),
    # Lock (WebDAV): a free name becomes an empty file, a file keeps its bytes.
    C("-", "lock-free", "lock new.txt", "ok", DAV),
    C("-", "lock-file", "lock f.txt", "ok", DAV),
    C("R7", "lock-missing-parent", "lock no/new.txt", "missing-parent", DAV),
    C("R8", "lock-256", "lock <256>", "bad-name", DAV),
    C("R9", "lock-control", "lock <ctl>", "bad-name", DAV),
    C("R10", "lock-outside", "lock out/new.txt", "outside", DAV, who="based"),
]


@pytest.fixture(scope="module")
async def site(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Site]:
    async with live_site(tmp_path_factory.mktemp("behaviour-table")) as live:
        yield live


RUNS = [
    pytest.param(case, protocol, id=f"{case.id}-{protocol}")
    for case in CASES
    for protocol in case.on
]


@pytest.mark.parametrize(("case", "protocol"), RUNS)
async def test_what_each_verb_does(site: Site, case: Case, protocol: str) -> None:
    folder = site.lay_out(f"{case.id}-{protocol}", case.who)
    before = site.snapshot()
    got = await answer_of(site, case, protocol, folder, before)
    after = site.snapshot()
    expected = case.expected(protocol)
    problems = check_disk(case, folder, before, after, expected)
    if not matches(expected, got):
        problems.insert(0, f"answered {got.native!r} ({'/'.join(sorted(got.means))})")
    assert not problems, f"[{case.rule}] expected {expected}: " + "; ".join(problems)


async def answer_of(site: Site, case: Case, protocol: str, folder: str, before: Snapshot) -> Answer:
    def at(rel: str) -> str:
        return where(protocol, case.who, folder, rel)

    verbs = await open_verbs(protocol, site.ports, case.who, site.tls, bucket_of(case.who))
    try:
        return await act(verbs, case, at(case.src), at(case.dst), f"{folder}/{case.dst}", before)
    finally:
        await verbs.close()


async def act(
    verbs: Verbs, case: Case, src: str, dst: str, on_disk: str, before: Snapshot
) -> Answer:
    if case.verb == "mkdir":
        return await verbs.mkdir(dst)
    if case.verb in ("upload", "replace"):
        return await verbs.upload(dst, PAYLOAD, case.overwrite)
    if case.verb == "rename":
        return await verbs.rename(src, dst, case.overwrite)
    if case.verb == "move":
        return await verbs.move(src, dst, case.overwrite)
    if case.verb == "copy":
        return await verbs.copy(src, dst, case.overwrite)
    if case.verb == "remove":
        return await verbs.remove(dst, folder=on_disk in before and before[on_disk] is None)
    assert case.verb == "lock", case.verb
    return await verbs.lock(dst)


def matches(expected: str, got: Answer) -> bool:
    """Whether the answer can mean one of ``expected``'s words: ``outside`` is any
    refusal or not-found, ``no-op`` an ``ok`` (the disk check asks that nothing changed)."""
    for word in expected.split("|"):
        if word == "outside" and got.means & {"denied", "missing", "missing-parent"}:
            return True
        if word == "no-op" and "ok" in got.means:
            return True
        if word in got.means:
            return True
    return False


# --- the disk, before and after ---------------------------------------------------------


def check_disk(
    case: Case, folder: str, before: Snapshot, after: Snapshot, expected: str
) -> list[str]:
    """What went wrong on disk: bytes lost or changed outside the case's targets, anything
    written outside its folder, a change made by a refusal, or the verb not done."""
    moved = [case.src] if case.verb in ("rename", "move") else []
    targets = [f"{folder}/{p}".rstrip("/") for p in (case.dst, *moved)]
    problems: list[str] = []
    lost = [
        p for p, data in before.items() if not _under_any(p, targets) and after.get(p, 0) != data
    ]
    if lost:
        problems.append(f"lost or changed {sorted(lost)[:6]}")
    strays = [p for p in after if p not in before and not _under(p, folder)]
    if strays:
        problems.append(f"written outside the case's folder {sorted(strays)[:6]}")
    if expected not in ("ok", "no-op"):
        if after != before:
            problems.append(f"a refusal changed {_changes(before, after)}")
    elif after != before or expected == "ok":
        problems += _not_done(case, folder, before, after, expected)
    return problems


def _not_done(
    case: Case, folder: str, before: Snapshot, after: Snapshot, expected: str
) -> list[str]:
    """What the verb, answered ``ok``, should have done and did not."""
    if expected == "no-op":
        return [f"a no-op changed {_changes(before, after)}"]
    src, dst = f"{folder}/{case.src}".rstrip("/"), f"{folder}/{case.dst}".rstrip("/")
    if case.verb == "mkdir":
        done = dst in after and after[dst] is None
    elif case.verb in ("upload", "replace"):
        done = after.get(dst) == PAYLOAD
    elif case.verb in ("rename", "move"):
        done = _tree(after, dst) == _tree(before, src) and src not in after
    elif case.verb == "copy":
        done = _tree(after, dst) == _tree(before, src)
    elif case.verb == "remove":
        done = not _tree(after, dst)
    else:
        done = after.get(dst) == before.get(dst, b"")
    return [] if done else [f"the {case.verb} is not done: {_changes(before, after)}"]


def _under(path: str, folder: str) -> bool:
    return path == folder or path.startswith(folder + "/")


def _under_any(path: str, folders: list[str]) -> bool:
    return any(_under(path, f) for f in folders)


def _tree(snapshot: Snapshot, top: str) -> Snapshot:
    """What ``snapshot`` holds at and below ``top``, by path relative to it."""
    return {p[len(top) :]: data for p, data in snapshot.items() if _under(p, top)}


def _changes(before: Snapshot, after: Snapshot) -> str:
    gone = sorted(p for p in before if p not in after)
    made = sorted(p for p in after if p not in before)
    changed = sorted(p for p in before if p in after and before[p] != after[p])
    return f"gone {gone[:6]}, made {made[:6]}, changed {changed[:6]}"


def test_the_table_names_each_case_once() -> None:
    ids = [case.id for case in CASES]
    assert len(ids) == len(set(ids))
    assert all(p in ALL for case in CASES for p in case.on)
