"""A Samba server for the SMB driver's tests: ``smbd`` in the foreground on a free port
of 127.0.0.1 (never 445, so every test also covers a port given in the address), with
its configuration, password database and state in a temporary folder.

The share maps the characters SMB refuses in names (``?``, ``*``, ``:`` ...) from the
private-use code points the driver sends them as (``vfs_catia``, the mapping macOS
clients use), so they are the real characters on the share's disk.
"""

from __future__ import annotations

import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from tests.fixtures.processes import Daemon, free_port, port_open

SMBD = "/usr/sbin/smbd"
SMBPASSWD = "/usr/bin/smbpasswd"
SMBSTATUS = "/usr/bin/smbstatus"
USER = "root"
PASSWORD = "smb-test-secret-pw"
SHARE = "share"
# The same folder again, shared read-only.
READ_ONLY = "readonly"

_SPECIAL = {0x22: 0xF020, 0x2A: 0xF021, 0x3A: 0xF022, 0x3C: 0xF023}
_SPECIAL |= {0x3E: 0xF024, 0x3F: 0xF025, 0x5C: 0xF026, 0x7C: 0xF027}
_MAPPINGS = ",".join(
    [f"0x{code:02x}:0x{0xF000 + code:04x}" for code in range(0x01, 0x20)]
    + [f"0x{code:02x}:0x{private:04x}" for code, private in _SPECIAL.items()]
)


def available() -> bool:
    return all(shutil.which(tool) for tool in (SMBD, SMBPASSWD))


@dataclass
class Samba:
    """A running smbd and where its share lives on this machine's disk."""

    daemon: Daemon
    port: int
    folder: Path
    config: Path

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def open_files(self) -> str:
        """What ``smbstatus`` lists as open on the share (empty when nothing is)."""
        done = subprocess.run(
            [SMBSTATUS, "-s", str(self.config), "-L"],
            capture_output=True,
            text=True,
            check=False,
        )
        return "\n".join(line for line in done.stdout.splitlines() if str(self.folder) in line)


def start(base: Path) -> Samba:
    """Write a configuration under ``base``, add the user and start smbd."""
    folder = base / SHARE
    folder.mkdir(parents=True)
    dirs = {name: base / name for name in ("lock", "state", "cache", "pid", "private", "rpc")}
    for path in dirs.values():
        path.mkdir()
    port = free_port()
    config = base / "smb.conf"
    config.write_text(
        f"""[global]
server role = standalone server
smb ports = {port}
interfaces = 127.0.0.1
bind interfaces only = yes
disable netbios = yes
map to guest = never
load printers = no
printcap name = /dev/null
disable spoolss = yes
passdb backend = tdbsam:{dirs["private"]}/passdb.tdb
lock directory = {dirs["lock"]}
state directory = {dirs["state"]}
cache directory = {dirs["cache"]}
pid directory = {dirs["pid"]}
private dir = {dirs["private"]}
ncalrpc dir = {dirs["rpc"]}
log level = 1

[{SHARE}]
path = {folder}
read only = no
force user = root
vfs objects = catia
catia:mappings = {_MAPPINGS}

[{READ_ONLY}]
path = {folder}
read only = yes
"""
    )
    subprocess.run(
        [SMBPASSWD, "-c", str(config), "-s", "-a", USER],
        input=f"{PASSWORD}\n{PASSWORD}\n",
        text=True,
        capture_output=True,
        check=True,
    )
    daemon = Daemon(
        "smbd",
        [SMBD, "-F", "--no-process-group", "--debug-stdout", "-s", str(config)],
        lambda: port_open(port),
        base / "smbd.log",
    )
    daemon.start()
    return Samba(daemon, port, folder, config)
