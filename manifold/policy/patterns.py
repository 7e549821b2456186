"""Regular expressions written by users and admins, run the way AList's Go regexp runs them.

Patterns reach the server from ``regex_rename``, meta ``hide`` lines and the
``privacy_regs`` setting. A backtracking engine can spend exponential time on a
pattern such as ``^(a+)+$``, so every one of them is compiled by RE2, the engine
behind Go's ``regexp``: matching takes time linear in the text, memory is capped
per pattern (``_MAX_MEM``) and the syntax is Go's, with no backreferences or
lookarounds. A pattern that does not compile raises ``PatternError`` whose text
reads as Go's ``regexp.Compile`` error, since AList shows that text to clients.

Matching works on UTF-8 bytes, as Go does; a name that is not valid UTF-8 (a
surrogate-escaped ``str``) round-trips unchanged. ``Pattern.matches`` yields the
matches Go's ``ReplaceAll`` replaces, and ``rename`` expands a Go
``Regexp.Expand`` template, refusing a result longer than a file name may be
before building it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import Any

import re2

from manifold.errors import BadRequest

MAX_PATTERN_BYTES = 4096
"""Compiling holds the interpreter lock; this and ``_PROBE_MEM`` bound how long."""

MAX_PROGRAM_SIZE = 10_000
"""RE2 instructions; matching a name costs up to this many steps per byte."""

MAX_TEMPLATE_BYTES = 1024
MAX_NAME_BYTES = 255

# A first compile on a small budget fails fast on a huge program; the one kept has
# RE2's usual budget, so its DFA (the fast path) rarely runs out of room.
_PROBE_MEM = 1 << 20
_RUN_MEM = 8 << 20

Span = Callable[[int], tuple[int, int]]
"""A match: group index -> (start, end) in bytes, ``(-1, -1)`` for a group that took no part."""

# RE2's error texts, longest first, and Go's words for the same error.
_GO_ERRORS = (
    ("invalid character class range", "invalid character class range"),
    ("invalid character class", "invalid character class"),
    ("invalid escape sequence", "invalid escape sequence"),
    ("invalid named capture group", "invalid named capture"),
    ("invalid perl operator", "invalid or unsupported Perl syntax"),
    ("invalid repetition size", "invalid repeat count"),
    ("invalid UTF-8", "invalid UTF-8"),
    ("bad repetition operator", "invalid nested repetition operator"),
    ("no argument for repetition operator", "missing argument to repetition operator"),
    ("missing ]", "missing closing ]"),
    ("missing )", "missing closing )"),
    ("unexpected )", "unexpected )"),
    ("trailing \\", "trailing backslash at end of expression"),
    ("pattern too large", "expression too large"),
)


class PatternError(ValueError):
    """A pattern that does not compile; ``str()`` is Go's message for it."""

    def __init__(self, code: str, expr: str) -> None:
        super().__init__(f"error parsing regexp: {code}: `{expr}`")


class Pattern:
    """One compiled pattern."""

    __slots__ = ("_regex",)

    def __init__(self, source: str) -> None:
        _refuse_go_rejects(source)
        try:
            probe = re2.compile(source, _options(_PROBE_MEM))
            if probe.programsize > MAX_PROGRAM_SIZE:
                raise PatternError("expression too large", source)
            self._regex: Any = re2.compile(source, _options(_RUN_MEM))
        except re2.error as exc:
            raise _go_error(exc.args[0] if exc.args else b"", source) from None

    @property
    def groups(self) -> int:
        return int(self._regex.groups)

    def group_number(self, name: str) -> int | None:
        number = self._regex.groupindex.get(name)
        return int(number) if number is not None else None

    def search(self, text: str) -> bool:
        return self._regex.search(encode(text)) is not None

    def matches(self, data: bytes) -> Iterator[Span]:
        """The matches Go's ``ReplaceAll`` replaces: an empty match right after another
        match is skipped, and the search moves on by at least one character."""
        last_end = search_at = 0
        while search_at <= len(data):
            match = self._regex.search(data, search_at)
            if match is None:
                return
            start, end = match.span(0)
            if end > last_end or start == 0:
                yield match.span
            last_end = end
            search_at = max(end, search_at + _rune_width(data, search_at))

    def mask(self, text: str) -> str:
        """Replace every match with as many ``*`` as it has bytes (AList's privacy mask)."""
        data, out, last = encode(text), bytearray(), 0
        for span in self.matches(data):
            start, end = span(0)
            out += data[last:start] + b"*" * (end - start)
            last = end
        return decode(bytes(out + data[last:]))


class Template:
    """A Go ``Regexp.Expand`` template, resolved once against its pattern's groups.

    ``$1``, ``${1}``, ``$name``, ``${name}`` and ``$$`` as in Go: a bare name runs
    over every letter, digit and ``_`` (so ``$1x`` names the group ``1x``), a group
    the pattern lacks or that took no part expands to nothing, and a ``$`` that
    starts no reference stays as it is.
    """

    __slots__ = ("_pieces",)

    def __init__(self, template: str, pattern: Pattern) -> None:
        if len(encode(template)) > MAX_TEMPLATE_BYTES:
            raise BadRequest(f"new_name_regex is longer than {MAX_TEMPLATE_BYTES} bytes")
        self._pieces = [
            encode(piece) if isinstance(piece, str) else piece
            for piece in _parse_template(template, pattern)
        ]

    def length(self, span: Span) -> int:
        return sum(len(p) if isinstance(p, bytes) else _span_len(span(p)) for p in self._pieces)

    def expand(self, data: bytes, span: Span) -> bytes:
        return b"".join(p if isinstance(p, bytes) else _group(data, span(p)) for p in self._pieces)


def rename(pattern: Pattern, template: Template, name: str) -> str | None:
    """``name`` with every match replaced (Go's ``ReplaceAllString``), or ``None`` when
    nothing matches. The new name's length is summed from the match spans first, so
    one over ``MAX_NAME_BYTES`` is refused without being built."""
    data = encode(name)
    size = last = 0
    matched = False
    for span in pattern.matches(data):
        start, end = span(0)
        size += start - last + template.length(span)
        last, matched = end, True
        if size > MAX_NAME_BYTES:
            break
    if not matched:
        return None
    if size + len(data) - last > MAX_NAME_BYTES:
        raise BadRequest(f"new name for [{name}] is longer than {MAX_NAME_BYTES} bytes")
    return decode(_replace_all(pattern, template, data))


def renames(pattern: Pattern, template: Template, names: Iterable[str]) -> list[tuple[str, str]]:
    """(old, new) for every name ``rename`` changes; refused whole if one is too long."""
    pairs = ((name, rename(pattern, template, name)) for name in names)
    return [(old, new) for old, new in pairs if new is not None and new != old]


def encode(text: str) -> bytes:
    """UTF-8 of ``text``; names read from disk keep their undecodable bytes.

    Any other lone surrogate (quoted from a request into a message) has no UTF-8 form
    and becomes U+FFFD, as the envelope shows it.
    """
    try:
        return text.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:
        utf16 = text.encode("utf-16-le", "surrogatepass")
        return utf16.decode("utf-16-le", "replace").encode("utf-8")


def decode(data: bytes) -> str:
    return data.decode("utf-8", "surrogateescape")


def _options(max_mem: int) -> Any:
    options = re2.Options()
    options.max_mem = max_mem
    options.log_errors = False
    return options


def _refuse_go_rejects(source: str) -> None:
    """What RE2 accepts but Go refuses: over-long patterns and ``\\C`` (any byte)."""
    if len(encode(source)) > MAX_PATTERN_BYTES:
        raise PatternError("expression too large", f"longer than {MAX_PATTERN_BYTES} bytes")
    index = 0
    while index < len(source) - 1:
        if source[index] != "\\":
            index += 1
        elif source[index + 1] == "C":
            raise PatternError("invalid escape sequence", "\\C")
        elif source[index + 1] == "Q":
            end = source.find("\\E", index + 2)
            index = len(source) if end < 0 else end + 2
        else:
            index += 2


def _go_error(raw: bytes | str, source: str) -> PatternError:
    message = raw.decode("utf-8", "replace") if isinstance(raw, bytes) else str(raw)
    for re2_text, go_text in _GO_ERRORS:
        if message.startswith(re2_text):
            expr = message[len(re2_text) :].removeprefix(":").strip()
            return PatternError(go_text, expr or source)
    return PatternError(message, source)


def _rune_width(data: bytes, index: int) -> int:
    """The bytes of the character at ``index``: 1 for a byte that starts none (as Go)."""
    for width in (1, 2, 3, 4):
        try:
            data[index : index + width].decode("utf-8")
        except UnicodeDecodeError:
            continue
        return width
    return 1


def _parse_template(template: str, pattern: Pattern) -> Iterator[str | int]:
    """Literal text and group numbers, as Go's ``expand`` walks a template."""
    rest = template
    while (dollar := rest.find("$")) >= 0:
        yield rest[:dollar]
        rest = rest[dollar + 1 :]
        if rest.startswith("$"):
            yield "$"
            rest = rest[1:]
            continue
        reference = _reference(rest)
        if reference is None:
            yield "$"
            continue
        name, rest = reference
        number = _group_number(name, pattern)
        if number is not None:
            yield number
    yield rest


def _reference(text: str) -> tuple[str, str] | None:
    """A group name at the start of ``text`` (bare or in braces) and what follows it."""
    braced = text.startswith("{")
    body = text[1:] if braced else text
    length = 0
    while length < len(body) and _is_name_char(body[length]):
        length += 1
    if length == 0:
        return None
    if braced:
        if not body.startswith("}", length):
            return None
        return body[:length], body[length + 1 :]
    return body[:length], body[length:]


def _is_name_char(char: str) -> bool:
    """Go's ``unicode.IsLetter``, ``unicode.IsDigit`` or ``_``."""
    return char == "_" or char.isalpha() or char.isdecimal()


def _group_number(name: str, pattern: Pattern) -> int | None:
    """Go's reading of a reference: digits without a leading zero are a number (up to
    1e8), anything else a group name; ``None`` for a group the pattern lacks."""
    is_number = name.isascii() and name.isdigit() and (name == "0" or not name.startswith("0"))
    if is_number and len(name) <= 9:
        number = int(name)
        return number if number <= pattern.groups else None
    return pattern.group_number(name)


def _replace_all(pattern: Pattern, template: Template, data: bytes) -> bytes:
    out, last = bytearray(), 0
    for span in pattern.matches(data):
        start, end = span(0)
        out += data[last:start] + template.expand(data, span)
        last = end
    return bytes(out + data[last:])


def _span_len(span: tuple[int, int]) -> int:
    return max(span[1] - span[0], 0)


def _group(data: bytes, span: tuple[int, int]) -> bytes:
    return data[span[0] : span[1]] if span[0] >= 0 else b""
