"""Who may see and change what: the meta rules, written once for every front end.

Only the nearest meta of a path counts. "Applies" means the meta is on the path
itself or its ``*_sub`` flag carries it down.
"""

from __future__ import annotations

import hmac
from functools import lru_cache

from manifold.models import Meta, Perm, User
from manifold.paths import is_sub_path, split_path
from manifold.policy.patterns import Pattern, PatternError

Hides = tuple[Pattern, ...]

_HIDE_ALL = Pattern("")


@lru_cache(maxsize=1024)
def compile_hide(hide: str) -> tuple[Hides, str]:
    """A meta's hide lines compiled, and AList's complaint about the first line that does
    not compile ("" when all do). Saving a meta calls this, so listings find it cached.

    A line that does not compile (saved before hide lines ran on RE2) hides every entry:
    failing closed keeps hidden what the admin meant to hide.
    """
    compiled: list[Pattern] = []
    complaint = ""
    for line in hide.split("\n"):
        try:
            compiled.append(Pattern(line))
        except PatternError as exc:
            compiled.append(_HIDE_ALL)
            complaint = complaint or f"{line} is illegal: {exc}"
    return tuple(compiled), complaint


def hides(meta: Meta | None, folder: str, user: User) -> Hides:
    """The hide patterns that apply to entries of ``folder`` for ``user``."""
    if meta is None or not meta.hide or user.can(Perm.SEE_HIDDEN):
        return ()
    if meta.path != folder and not (meta.h_sub and is_sub_path(meta.path, folder)):
        return ()
    return compile_hide(meta.hide)[0]


def is_hidden(name: str, patterns: Hides) -> bool:
    return any(p.search(name) for p in patterns)


def can_access(user: User, meta: Meta | None, path: str, password: str) -> bool:
    """Whether ``user`` may read ``path`` with ``password`` (AList's CanAccess)."""
    parent, name = split_path(path)
    if name and is_hidden(name, hides(meta, parent, user)):
        return False
    if meta is None or (meta.path != path and not meta.p_sub):
        return True
    return unlocks(user, meta, password)


def unlocks(user: User, meta: Meta, password: str) -> bool:
    """Whether ``password`` (or the user's right to go without) opens ``meta``'s password."""
    if not meta.password or user.can(Perm.ACCESS_WITHOUT_PASSWORD):
        return True
    return hmac.compare_digest(password.encode(), meta.password.encode())


def meta_allows_write(meta: Meta | None, path: str) -> bool:
    return meta is not None and meta.write and (meta.w_sub or meta.path == path)


def can_write(user: User, meta: Meta | None, path: str) -> bool:
    return user.can(Perm.WRITE) or meta_allows_write(meta, path)


def readme_for(meta: Meta | None, path: str) -> str:
    return meta.readme if meta is not None and (meta.path == path or meta.r_sub) else ""


def header_for(meta: Meta | None, path: str) -> str:
    return meta.header if meta is not None and (meta.path == path or meta.header_sub) else ""


def password_applies(meta: Meta | None, path: str) -> bool:
    """Whether a folder password guards ``path`` (its objects then carry signs)."""
    return meta is not None and bool(meta.password) and (meta.path == path or meta.p_sub)
