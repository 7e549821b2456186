"""What the log may say about an error, and the server's logging setup.

A database error's text holds the SQL statement and its parameters (paths, names,
password hashes, tokens), so a log line names such an error by its class only.
``error_text`` is how Manifold's own code describes a caught error; the filter that
``setup`` installs applies the same rule to every record, including those of other
libraries (asyncio's "exception was never retrieved", the server's own), so no
traceback or message of a database error reaches the log.
"""

from __future__ import annotations

import logging
import time
from typing import Any

import orjson

from manifold.errors import ManifoldError

FORMAT = "%(levelname)s %(name)s %(message)s"
# Packages whose exceptions carry statements or parameters in their text.
_DATABASE_MODULES = ("sqlalchemy", "sqlite3", "aiosqlite", "asyncpg", "aiomysql", "pymysql")


def is_database_error(exc: BaseException) -> bool:
    return type(exc).__module__.split(".")[0] in _DATABASE_MODULES


def error_text(exc: BaseException) -> str:
    """A client-safe message for Manifold's errors; for others, the class name only."""
    if isinstance(exc, ManifoldError):
        return exc.message
    return type(exc).__name__


def detail_text(exc: BaseException) -> str:
    """Like ``error_text``, but keeps the text of errors that hold no database content."""
    if isinstance(exc, ManifoldError) or is_database_error(exc):
        return error_text(exc)
    return str(exc) or type(exc).__name__


class DatabaseErrorFilter(logging.Filter):
    """Strips database errors from records: their arguments and tracebacks become class names."""

    def filter(self, record: logging.LogRecord) -> bool:
        if isinstance(record.args, tuple):
            record.args = tuple(_safe(arg) for arg in record.args)
        elif isinstance(record.args, dict):
            record.args = {key: _safe(value) for key, value in record.args.items()}
        exc = record.exc_info[1] if record.exc_info else None
        if exc is not None and _holds_database_error(exc):
            record.msg = f"{record.getMessage()} ({type(exc).__name__})"
            record.args = None
            record.exc_info = None
            record.exc_text = None
        return True


def _safe(arg: object) -> object:
    return type(arg).__name__ if isinstance(arg, BaseException) and is_database_error(arg) else arg


def _holds_database_error(exc: BaseException) -> bool:
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        if is_database_error(current):
            return True
        seen.add(id(current))
        current = current.__cause__ or current.__context__
    return False


# What a record carries beyond the standard attributes, copied into a JSON line.
_STANDARD = frozenset(logging.makeLogRecord({}).__dict__) | {"message", "asctime", "color_message"}


class JsonFormatter(logging.Formatter):
    """One JSON object per line: time, level, logger, message, any ``extra`` fields
    (the access log's method, route, status...) and the traceback as text, if any.

    It formats what the database error filter has already cleaned, and adds no field of
    its own that could hold a secret.
    """

    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, Any] = {
            "time": _iso(record.created),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        for key, value in record.__dict__.items():
            if key not in _STANDARD and not key.startswith("_"):
                line[key] = value
        if record.exc_info:
            line["error"] = self.formatException(record.exc_info)
        return orjson.dumps(line, default=str).decode()


def _iso(created: float) -> str:
    seconds = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(created))
    return f"{seconds}.{int(created % 1 * 1000):03d}Z"


def setup(level: str, log_format: str = "text") -> None:
    """Log to standard error at ``level``, through the database error filter; as text,
    or as one JSON object a line (``log_format: json``)."""
    logging.basicConfig(level=level.upper(), format=FORMAT)
    for handler in logging.getLogger().handlers:
        handler.addFilter(DatabaseErrorFilter())
        if log_format == "json":
            handler.setFormatter(JsonFormatter())
