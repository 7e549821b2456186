"""The docs and the code name the same things, and the docs' links lead somewhere.

Both ways: every command-line option, configuration key, Manifold setting and driver
option the code defines is documented on the page it belongs to (a key, a setting or a
driver's option as a backquoted row of that page's table, whose first header cell is
``key``, ``setting`` or ``option``; an option in backquotes), and every key, setting,
option, command-line option or driver the docs present there exists in the code. Every
relative link in README.md and docs/ resolves to a file, and every ``#anchor`` to a
heading of that file. Each check returns its problems, naming what and where, so that
the last tests can show a check fails on a copy of the docs broken on purpose.
"""

from __future__ import annotations

import dataclasses
import re
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from manifold.cli import main
from manifold.config import Config
from manifold.drivers.registry import builtin_registry
from manifold.services.admin.settings_defaults import ALIST_SETTINGS, DEFAULT_SETTINGS

ROOT = Path(__file__).resolve().parents[2]
CONFIGURE = "docs/install-and-configure.md"
STORAGES = "docs/storages/README.md"
# Keys of Config that are no key of the file: the data folder is where the file is.
NOT_FILE_KEYS = {"data_dir"}
Problems = list[str]


# --- reading the docs --------------------------------------------------------------


def code_spans(text: str) -> set[str]:
    """The text inside every pair of backquotes, fenced blocks left out."""
    return set(re.findall(r"`([^`\n]+)`", strip_fences(text)))


def strip_fences(text: str) -> str:
    return re.sub(r"^```.*?^```", "", text, flags=re.S | re.M)


def table_rows(text: str, header: str) -> Iterator[list[str]]:
    """The cells of each row of every table whose first header cell is ``header``."""
    inside = False
    for line in strip_fences(text).splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if not line.startswith("|"):
            inside = False
        elif cells[0] == header:
            inside = True
        elif inside and not set(cells[0]) <= set("-: "):
            yield cells


def first_column_names(text: str, header: str) -> set[str]:
    """The backquoted name in the first cell of each row of the ``header`` tables."""
    return {m.group(1) for r in table_rows(text, header) if (m := re.match(r"`([^`]+)`", r[0]))}


def read(root: Path, page: str) -> str:
    return (root / page).read_text("utf-8")


# --- what the code defines -----------------------------------------------------------


def config_keys() -> set[str]:
    return {f.name for f in dataclasses.fields(Config)} - NOT_FILE_KEYS


def manifold_settings() -> set[str]:
    """The settings Manifold adds to AList's (AList's own are documented by AList)."""
    return {s.key for s in DEFAULT_SETTINGS} - {s.key for s in ALIST_SETTINGS}


def all_settings() -> set[str]:
    return {s.key for s in DEFAULT_SETTINGS}


def help_of(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    with pytest.raises(SystemExit):
        main([*argv, "--help"])
    return capsys.readouterr().out


def cli_options(capsys: pytest.CaptureFixture[str]) -> dict[str, str]:
    """Every ``--option`` of every command, read from the parser's own help: option ->
    the command that has it."""
    found: dict[str, str] = {}
    commands: list[list[str]] = [[]]
    while commands:
        argv = commands.pop()
        text = help_of(argv, capsys)
        for option in re.findall(r"(?<![\w-])(--[a-z][\w-]*)", text):
            found.setdefault(option, " ".join(["manifold", *argv]))
        usage = text.split("\n\n", 1)[0]
        if choices := re.search(r"\{([\w,-]+)\}", usage):
            commands += [[*argv, c] for c in choices.group(1).split(",")]
    found.pop("--help", None)
    return found


def driver_options() -> dict[str, set[str]]:
    registry = builtin_registry()
    return {
        info.name: {item["name"] for item in registry.info_json(info.name)["additional"] or []}
        for info in registry.all()
    }


# --- the checks ----------------------------------------------------------------------


def check_config(root: Path) -> Problems:
    table = first_column_names(read(root, CONFIGURE), "key")
    missing = [
        f"config key `{k}` (manifold/config.py) is not in the key table of {CONFIGURE}"
        for k in sorted(config_keys() - table)
    ]
    extra = [
        f"{CONFIGURE} documents config key `{k}`, which Config (manifold/config.py) lacks"
        for k in sorted(table - config_keys())
    ]
    return missing + extra


def check_settings(root: Path) -> Problems:
    table = first_column_names(read(root, CONFIGURE), "setting")
    where = "manifold/services/admin/settings_defaults.py"
    missing = [
        f"setting `{k}` ({where}) is not in the setting table of {CONFIGURE}"
        for k in sorted(manifold_settings() - table)
    ]
    extra = [
        f"{CONFIGURE} documents setting `{k}`, which {where} lacks"
        for k in sorted(table - all_settings())
    ]
    return missing + extra


def check_cli(root: Path, options: dict[str, str]) -> Problems:
    spans = " ".join(code_spans(read(root, CONFIGURE)))
    shown = set(re.findall(r"(?<![\w-])(--[a-z][\w-]*)", spans))
    missing = [
        f"`{o}` of `{options[o]}` (manifold/cli.py) is not in backquotes in {CONFIGURE}"
        for o in sorted(set(options) - shown)
    ]
    extra = [
        f"{CONFIGURE} shows the option `{o}`, which no command of manifold/cli.py has"
        for o in sorted(shown - set(options))
    ]
    return missing + extra


def driver_pages(root: Path) -> dict[str, str]:
    """Driver name -> its page (relative to the repository), from the storages index."""
    pages = {}
    for cells in table_rows(read(root, STORAGES), "driver"):
        name = re.fullmatch(r"`([^`]+)`", cells[0])
        link = re.search(r"\]\(([^)#]+)\)", cells[1]) if len(cells) > 1 else None
        if name and link:
            pages[name.group(1)] = str(Path(STORAGES).parent / link.group(1))
    return pages


def check_drivers(root: Path) -> Problems:
    pages, options = driver_pages(root), driver_options()
    problems = [
        f"driver `{d}` (manifold/drivers) has no row in the driver table of {STORAGES}"
        for d in sorted(set(options) - set(pages))
    ] + [
        f"{STORAGES} lists driver `{d}`, which no package registers"
        for d in sorted(set(pages) - set(options))
    ]
    for driver in sorted(set(pages) & set(options)):
        problems += check_driver_page(root, pages[driver], driver, options[driver])
    return problems


def check_driver_page(root: Path, page: str, driver: str, options: set[str]) -> Problems:
    if not (root / page).is_file():
        return [f"{STORAGES} points driver `{driver}` at {page}, which does not exist"]
    text = read(root, page)
    documented = first_column_names(text, "option")
    missing = [
        f"option `{o}` of driver `{driver}` (its meta.py) is not in the option table of {page}"
        for o in sorted(options - documented)
    ]
    extra = [
        f"{page} presents option `{o}`, which driver `{driver}` does not have"
        for o in sorted(documented - options)
    ]
    return missing + extra


# --- links ---------------------------------------------------------------------------


def doc_files(root: Path) -> list[Path]:
    return [root / "README.md", *sorted((root / "docs").rglob("*.md"))]


def anchors(path: Path) -> set[str]:
    """GitHub's anchors of the headings of ``path`` (a repeated one gets ``-1``, ...)."""
    seen: dict[str, int] = {}
    slugs = set()
    for heading in re.findall(r"^#+ (.+)$", strip_fences(path.read_text("utf-8")), re.M):
        slug = re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")
        count = seen.get(slug, 0)
        slugs.add(f"{slug}-{count}" if count else slug)
        seen[slug] = count + 1
    return slugs


def check_links(root: Path) -> Problems:
    problems = []
    for path in doc_files(root):
        text = strip_fences(path.read_text("utf-8"))
        for target in re.findall(r"\]\(([^)\s]+)\)", text):
            if re.match(r"[a-z]+:", target):
                continue
            problems += check_link(root, path, target)
    return problems


def check_link(root: Path, source: Path, target: str) -> Problems:
    file, _, anchor = target.partition("#")
    dest = (source.parent / file).resolve() if file else source
    where = f"{source.relative_to(root)} links to `{target}`"
    if not dest.exists():
        return [f"{where}: no file {file}"]
    if anchor and dest.suffix == ".md" and anchor not in anchors(dest):
        return [f"{where}: no heading #{anchor} in {dest.relative_to(root)}"]
    return []


# --- the tests -----------------------------------------------------------------------


def test_every_config_key_is_documented_and_exists() -> None:
    assert check_config(ROOT) == []


def test_every_manifold_setting_is_documented_and_exists() -> None:
    assert check_settings(ROOT) == []


def test_every_command_line_option_is_documented_and_exists(
    capsys: pytest.CaptureFixture[str],
) -> None:
    options = cli_options(capsys)
    assert {"--data", "--host", "--port", "--workers", "--no-ui", "--out", "--force"} <= set(
        options
    )
    assert check_cli(ROOT, options) == []


def test_every_driver_option_is_on_its_page_and_exists() -> None:
    assert check_drivers(ROOT) == []


def test_every_relative_link_and_anchor_resolves() -> None:
    assert check_links(ROOT) == []


# --- the checks catch what they are for ------------------------------------------------


def broken_copy(tmp_path: Path, page: str, change: Callable[[str], str]) -> Path:
    """A copy of README.md and docs/ with ``change`` applied to ``page``."""
    tmp_path.mkdir(parents=True, exist_ok=True)
    shutil.copy(ROOT / "README.md", tmp_path / "README.md")
    shutil.copytree(ROOT / "docs", tmp_path / "docs")
    target = tmp_path / page
    before = target.read_text("utf-8")
    target.write_text(change(before), "utf-8")
    assert target.read_text("utf-8") != before
    return tmp_path


def replacing(old: str, new: str) -> Callable[[str], str]:
    return lambda text: text.replace(old, new)


def without_row(name: str) -> Callable[[str], str]:
    return lambda text: re.sub(rf"^\| `{re.escape(name)}` \|.*\n", "", text, flags=re.M)


def test_a_config_key_removed_or_made_up_is_named(tmp_path: Path) -> None:
    root = broken_copy(tmp_path, CONFIGURE, without_row("redis_url"))
    assert any("`redis_url`" in p and CONFIGURE in p for p in check_config(root))
    fake = "| `no_such_key` | `1` | made up |\n"
    invented = broken_copy(tmp_path / "b", CONFIGURE, replacing("| `port` |", fake + "| `port` |"))
    assert check_config(invented) == [
        f"{CONFIGURE} documents config key `no_such_key`, which Config (manifold/config.py) lacks"
    ]


def test_a_setting_removed_or_made_up_is_named(tmp_path: Path) -> None:
    root = broken_copy(tmp_path, CONFIGURE, without_row("multipart_idle_seconds"))
    assert any("`multipart_idle_seconds`" in p for p in check_settings(root))
    fake = "| `no_such_setting` | `1` | made up |\n"
    change = replacing("| `manifold_version` |", fake + "| `manifold_version` |")
    assert any(
        "`no_such_setting`" in p
        for p in check_settings(broken_copy(tmp_path / "b", CONFIGURE, change))
    )


def test_a_command_line_option_removed_or_made_up_is_named(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    options = cli_options(capsys)
    root = broken_copy(
        tmp_path, CONFIGURE, lambda t: t.replace("`--force`", "force").replace(" [--force]", "")
    )
    assert any("`--force`" in p and "restore" in p for p in check_cli(root, options))
    other = broken_copy(tmp_path / "b", CONFIGURE, replacing("[--force]", "[--forse]"))
    assert any("`--forse`" in p for p in check_cli(other, options))


def test_a_driver_option_removed_or_made_up_is_named(tmp_path: Path) -> None:
    page = driver_pages(ROOT)["Local"]
    root = broken_copy(tmp_path, page, replacing("`recycle_bin_path`", "recycle bin"))
    assert any("`recycle_bin_path`" in p and page in p for p in check_drivers(root))
    fake = "| `no_such_option` | made up |\n"
    change = replacing("| `mkdir_perm` |", fake + "| `mkdir_perm` |")
    assert any(
        "`no_such_option`" in p for p in check_drivers(broken_copy(tmp_path / "b", page, change))
    )


def test_a_broken_link_or_anchor_is_named(tmp_path: Path) -> None:
    root = broken_copy(tmp_path, "README.md", replacing("docs/benchmarks.md", "docs/bench.md"))
    assert any("README.md" in p and "docs/bench.md" in p for p in check_links(root))
    change = replacing("(api.md#uploads)", "(api.md#no-such-heading)")
    other = broken_copy(tmp_path / "b", CONFIGURE, change)
    assert any("#no-such-heading" in p for p in check_links(other))
