"""The helpers every driver uses: library errors translated, blocking calls in threads."""

from __future__ import annotations

import threading

import pytest

from manifold.drivers.helpers import run_blocking, translate, translating
from manifold.errors import (
    ManifoldError,
    ObjectExists,
    ObjectNotFound,
    PermissionDenied,
    TemporaryFailure,
)


class LibraryError(Exception):
    pass


class NoSuchFile(LibraryError):
    pass


class NoSuchFileHere(NoSuchFile):
    pass


TABLE = {
    LibraryError: TemporaryFailure,
    NoSuchFile: ObjectNotFound,
    PermissionError: PermissionDenied,
    FileExistsError: lambda exc: ObjectExists(f"taken: {exc.filename}"),
}


def test_the_most_specific_entry_wins_whatever_the_order() -> None:
    assert isinstance(translate(NoSuchFileHere(), TABLE), ObjectNotFound)
    assert isinstance(translate(NoSuchFile(), dict(reversed(TABLE.items()))), ObjectNotFound)
    assert isinstance(translate(LibraryError(), TABLE), TemporaryFailure)


def test_a_callable_entry_builds_the_error_and_the_default_text_is_alists() -> None:
    made = translate(FileExistsError(17, "exists", "a.txt"), TABLE)
    assert isinstance(made, ObjectExists) and made.message == "taken: a.txt"
    assert translate(NoSuchFile("x"), TABLE).message == "object not found"  # type: ignore[union-attr]


def test_translating_keeps_the_cause_and_lets_unknown_errors_through() -> None:
    with pytest.raises(ObjectNotFound) as caught, translating(TABLE):
        raise NoSuchFileHere("gone")
    assert isinstance(caught.value.__cause__, NoSuchFileHere)
    with pytest.raises(KeyError), translating(TABLE):
        raise KeyError("not a library error")
    with pytest.raises(ObjectExists), translating({Exception: TemporaryFailure}):
        raise ObjectExists()  # already one of ours: never translated again
    assert issubclass(ObjectExists, ManifoldError)


async def test_run_blocking_runs_in_a_worker_thread() -> None:
    main = threading.get_ident()
    assert await run_blocking(threading.get_ident) != main
    assert await run_blocking(divmod, 7, 2) == (3, 1)
