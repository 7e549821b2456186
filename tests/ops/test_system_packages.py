"""A fresh Debian machine gets every system program and module the tests and benchmarks
load: each belongs to a package that the documented commands install, through
dependencies alone (``apt_install`` passes ``--no-install-recommends``).

The packages are read from the scripts the README and the benchmarks page
(``docs/benchmarks.md``) name (and what they source), never
restated here; the owner of each file comes from ``dpkg -S``, the closure from the
installed packages' ``Depends`` and ``Pre-Depends``. What every Debian system has (the
essential and required packages) counts as installed.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.fixtures.dbservers import postgres_bindir

ROOT = Path(__file__).resolve().parents[2]
SEARCH_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

# What tests/ and bench/ start (Daemon, subprocess, shutil.which), each by the name or
# path they use; several names are one program under its old and new names.
PROGRAMS = (
    "/usr/sbin/smbd", "/usr/bin/smbpasswd", "/usr/bin/smbstatus",  # tests/drivers/smb_server
    "/usr/sbin/sshd", "ssh-keygen", "sftp", "chpasswd",  # sftp_server, sftp clients
    "slapd",  # tests/fixtures/ldapserver
    "/usr/sbin/vsftpd", "openssl", "useradd",  # tests/drivers/ftp_server
    "redis-server",  # tests/fixtures/redisserver
    "mariadbd|mysqld", "mariadb-install-db|mysql_install_db",  # tests/fixtures/dbservers
    "mariadb-admin|mysqladmin", "mariadb|mysql",
    "nginx", "curl", "lftp", "litmus",  # tests/multi, bench, protocol clients
    "aria2c", "qbittorrent-nox", "transmission-daemon",  # offline download tools
    "chromium", "ffmpeg", "ffprobe", "node",  # browser, thumbnails, the OIDC provider
    "/bin/sh", "dpkg-query",  # a script's shell, and this test
)  # fmt: skip
# What only the benchmarks start: scripts/bench installs it, so a machine set up by
# scripts/test alone may lack it (then it is not checked).
BENCH_ONLY = ("wrk",)
POSTGRES_TOOLS = ("initdb", "postgres", "pg_isready", "createdb")
# Found by name by a test that skips without it, and installed by none of the commands.
NOT_INSTALLED = {"aws"}


@dataclass
class Installed:
    """The installed packages: what each depends on, and what provides a virtual name."""

    depends: dict[str, list[list[str]]] = field(default_factory=dict)
    providers: dict[str, list[str]] = field(default_factory=dict)
    base: set[str] = field(default_factory=set)


# The page that tells how to run the benchmarks (scripts/bench).
BENCHMARKS = "docs/benchmarks.md"


def scripts_of_readme() -> list[Path]:
    """The scripts the README and the benchmarks page tell a user to run, and their sources."""
    readme = "".join((ROOT / p).read_text("utf-8") for p in ("README.md", BENCHMARKS))
    named = sorted({ROOT / "scripts" / m for m in re.findall(r"scripts/([a-z]\w*)", readme)})
    sourced = set()
    for script in named:
        sourced |= {ROOT / m for m in re.findall(r"^\. (\S+)", script.read_text(), re.M)}
    return [p for p in [*named, *sorted(sourced)] if p.is_file()]


def packages_named(scripts: list[Path]) -> set[str]:
    """Every package an ``apt_install`` command line of ``scripts`` names."""
    names: set[str] = set()
    for script in scripts:
        text = script.read_text("utf-8").replace("\\\n", " ")
        for words in re.findall(r"\bapt_install\b(?!\(\))([^;&|)#\n]*)", text):
            names |= {w for w in words.split() if re.fullmatch(r"[a-z0-9][a-z0-9+.-]+", w)}
    return names


def installed() -> Installed:
    fields = "${Package}\t${Status}\t${Essential}\t${Priority}\t${Depends}, ${Pre-Depends}"
    listed = subprocess.run(
        ["dpkg-query", "-W", "-f", fields + "\t${Provides}\n"],
        capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    found = Installed()
    for line in listed.splitlines():
        name, status, essential, priority, depends, provides = line.split("\t")
        if not status.endswith(" installed"):
            continue
        found.depends[name] = [_alternatives(group) for group in depends.split(",")]
        for virtual in provides.split(","):
            if virtual.strip():
                found.providers.setdefault(_bare(virtual), []).append(name)
        if essential == "yes" or priority == "required":
            found.base.add(name)
    return found


def _alternatives(group: str) -> list[str]:
    return [_bare(name) for name in group.split("|") if name.strip()]


def _bare(name: str) -> str:
    """A package name without its version constraint and architecture qualifier."""
    return name.strip().split(" ")[0].split(":")[0]


def closure(named: set[str], packages: Installed) -> set[str]:
    """``named`` and what they depend on, as apt would pick it: the first alternative
    installed here; a virtual name by what provides it here."""
    todo, seen = list(named | packages.base), set()
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        for group in packages.depends.get(name, []):
            todo += _chosen(group, packages)[:1]
    return seen


def _chosen(group: list[str], packages: Installed) -> list[str]:
    real = [name for name in group if name in packages.depends]
    return real or [p for name in group for p in packages.providers.get(name, [])]


def owner(path: Path) -> str | None:
    """The package that installed ``path`` (as given, its target, or its other half of
    a merged /usr), or None."""
    for candidate in _spellings(path):
        done = subprocess.run(["dpkg", "-S", str(candidate)], capture_output=True, text=True)
        for line in done.stdout.splitlines():
            if not line.startswith("diversion ") and ": " in line:
                return line.split(": ")[0].split(":")[0]
    return None


def _spellings(path: Path) -> list[Path]:
    both = [path, path.resolve()]
    merged = [Path(str(p).removeprefix("/usr")) for p in both if str(p).startswith("/usr/")]
    return both + merged + [Path("/usr" + str(p)) for p in both if not str(p).startswith("/usr/")]


def program(spec: str) -> Path | None:
    for name in spec.split("|"):
        found = shutil.which(name, path=SEARCH_PATH)
        if found:
            return Path(found)
    return None


def samba_modules() -> list[Path]:
    """The VFS modules the smb.conf of the SMB fixture names, where smbd loads them."""
    conf = (ROOT / "tests" / "drivers" / "smb_server.py").read_text("utf-8")
    names = [n for line in re.findall(r"vfs objects\s*=\s*(.+)", conf) for n in line.split()]
    built = subprocess.run(["/usr/sbin/smbd", "-b"], capture_output=True, text=True, check=True)
    (modules,) = re.findall(r"MODULESDIR:\s*(\S+)", built.stdout)
    return [Path(modules) / "vfs" / f"{name}.so" for name in names]


def slapd_modules() -> list[Path]:
    """The modules the LDAP fixture's slapd.conf loads, from its module path."""
    conf = (ROOT / "tests" / "fixtures" / "ldapserver.py").read_text("utf-8")
    (folder,) = re.findall(r"^modulepath (\S+)", conf, re.M)
    return [Path(folder) / f"{n}.so" for n in re.findall(r"^moduleload (\S+)", conf, re.M)]


def files_loaded() -> dict[str, Path | None]:
    """Each program and module by what the tests call it, and where it is here."""
    found: dict[str, Path | None] = {spec: program(spec) for spec in PROGRAMS}
    found |= {spec: path for spec in BENCH_ONLY if (path := program(spec)) is not None}
    bindir = postgres_bindir()
    for tool in POSTGRES_TOOLS:
        found[f"PostgreSQL's {tool}"] = bindir / tool if bindir else None
    for module in [*samba_modules(), *slapd_modules()]:
        found[str(module)] = module if module.exists() else None
    return found


def names_in_sources() -> set[str]:
    """Programs tests/ and bench/ look up by name or start by absolute path."""
    found: set[str] = set()
    for source in [*(ROOT / "tests").rglob("*.py"), *(ROOT / "bench").rglob("*.py")]:
        text = source.read_text("utf-8")
        found |= set(re.findall(r"shutil\.which\(\"([\w.+-]+)\"", text))
        found |= set(re.findall(r"\"((?:/usr)?/s?bin/[\w.+-]+)\"", text))
    return found


@pytest.fixture(scope="module")
def ours() -> set[str]:
    if shutil.which("dpkg-query") is None:
        pytest.fail("dpkg is not installed: these tests check a Debian machine")
    return closure(packages_named(scripts_of_readme()), installed())


def test_the_readme_s_commands_name_packages() -> None:
    named = packages_named(scripts_of_readme())
    assert {"samba", "openssh-server", "slapd", "libarchive13"} <= named, sorted(named)


def test_every_program_the_sources_start_is_checked() -> None:
    listed = {name for spec in (*PROGRAMS, *BENCH_ONLY) for name in spec.split("|")}
    listed |= {os.path.basename(spec) for spec in listed}
    unlisted = {n for n in names_in_sources() if os.path.basename(n) not in listed}
    assert unlisted <= NOT_INSTALLED, f"add to PROGRAMS: {sorted(unlisted - NOT_INSTALLED)}"


def test_each_program_and_module_comes_from_our_packages(ours: set[str]) -> None:
    missing = []
    for what, path in files_loaded().items():
        package = owner(path) if path is not None else None
        if package is None:
            missing.append(f"{what}: not installed here (at {path})")
        elif package not in ours:
            missing.append(f"{what} ({path}) is in package {package}: no command installs it")
    assert not missing, "\n".join(missing)
