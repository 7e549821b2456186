"""A database error reaches the log as its class name: never its SQL or parameters."""

from __future__ import annotations

import io
import logging
import sqlite3

import pytest
from sqlalchemy.exc import IntegrityError, OperationalError

from manifold.errors import ObjectNotFound
from manifold.logs import DatabaseErrorFilter, detail_text, error_text

SECRET = "tok-3f9a-secret-parameter"
STATEMENT = "INSERT INTO search_nodes (parent, name) VALUES (?, ?)"


def db_error(kind: type[Exception] = OperationalError) -> Exception:
    orig = sqlite3.OperationalError("database is locked")
    return kind(STATEMENT, ("/local", SECRET), orig)  # type: ignore[call-arg]


def chained() -> Exception:
    try:
        try:
            raise db_error()
        except OperationalError as exc:
            raise RuntimeError("index write failed") from exc
    except RuntimeError as outer:
        return outer


def formatted(emit: str, exc: Exception) -> str:
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.addFilter(DatabaseErrorFilter())
    logger = logging.getLogger(f"test.logs.{emit}")
    logger.addHandler(handler)
    logger.propagate = False
    try:
        if emit == "argument":
            logger.warning("write failed: %s", exc)
        elif emit == "exc_info":
            logger.warning("write failed", exc_info=exc)
        else:
            logger.exception("write failed", exc_info=(type(exc), exc, exc.__traceback__))
    finally:
        logger.removeHandler(handler)
    return stream.getvalue()


class TestDatabaseErrorFilter:
    @pytest.mark.parametrize("emit", ["argument", "exc_info", "exception"])
    @pytest.mark.parametrize("make", [db_error, chained, lambda: db_error(IntegrityError)])
    def test_only_the_class_is_logged(self, emit: str, make: object) -> None:
        exc = make()  # type: ignore[operator]
        text = formatted(emit, exc)
        assert "write failed" in text
        assert SECRET not in text and "search_nodes" not in text and "SQL" not in text, text
        assert "Traceback" not in text

    def test_other_records_are_untouched(self) -> None:
        assert formatted("argument", ValueError("plain detail")).strip() == (
            "write failed: plain detail"
        )


class TestErrorText:
    @pytest.mark.parametrize(
        ("exc", "text", "detail"),
        [
            (db_error(), "OperationalError", "OperationalError"),
            (ObjectNotFound(), "object not found", "object not found"),
            (OSError(5, "I/O error"), "OSError", "[Errno 5] I/O error"),
            (sqlite3.OperationalError(f"near {SECRET}"), "OperationalError", "OperationalError"),
        ],
    )
    def test_texts(self, exc: Exception, text: str, detail: str) -> None:
        assert (error_text(exc), detail_text(exc)) == (text, detail)
