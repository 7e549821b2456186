"""An OpenSSH server for the SFTP driver's tests, on a private port with its own keys.

sshd puts every connection in a session of its own (``setsid``), outside the process
group ``Daemon`` signals: killing the listener alone would leave the connections up.
``SshServer`` therefore also signals the listener's descendants, found through
``/proc`` while the listener is stopped (so it forks no new one meanwhile).
"""

from __future__ import annotations

import contextlib
import os
import pwd
import secrets
import shutil
import signal
import subprocess
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from tests.fixtures.processes import Daemon, free_port, port_open

SSHD = "/usr/sbin/sshd"
# sshd's privilege separation folder; Debian makes it only when the service starts.
PRIVSEP_DIR = "/run/sshd"
# A system account for password logins, made once on a machine that lacks it.
PASSWORD_USER = "manifold-sftp"


@dataclass(frozen=True, slots=True)
class PasswordLogin:
    username: str
    password: str
    folder: Path  # writable by the account, readable by everyone


def fingerprint(public_key: Path) -> str:
    """The key's fingerprint as ``ssh-keygen -lf`` prints it (``SHA256:...``)."""
    out = subprocess.run(
        ["ssh-keygen", "-lf", str(public_key)], check=True, capture_output=True, text=True
    ).stdout
    return out.split()[1]


def _keygen(path: Path) -> None:
    subprocess.run(
        ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "", "-f", str(path)], check=True
    )


class SshServer:
    """sshd serving SFTP on 127.0.0.1: key logins for root, password logins allowed."""

    def __init__(self, folder: Path, max_sessions: int = 100) -> None:
        self.folder = folder
        self.port = free_port()
        self.host_key = folder / "host_key"
        self.client_key = folder / "client_key"
        _keygen(self.host_key)
        _keygen(self.client_key)
        shutil.copyfile(f"{self.client_key}.pub", folder / "authorized_keys")
        config = folder / "sshd_config"
        config.write_text(
            f"Port {self.port}\n"
            "ListenAddress 127.0.0.1\n"
            f"HostKey {self.host_key}\n"
            f"PidFile {folder / 'sshd.pid'}\n"
            f"AuthorizedKeysFile {folder / 'authorized_keys'}\n"
            "StrictModes no\n"
            "UsePAM no\n"
            "PasswordAuthentication yes\n"
            "KbdInteractiveAuthentication no\n"
            "PermitRootLogin prohibit-password\n"
            "MaxStartups 100\n"
            f"MaxSessions {max_sessions}\n"
            "Subsystem sftp internal-sftp\n"
        )
        os.makedirs(PRIVSEP_DIR, mode=0o755, exist_ok=True)
        argv = [SSHD, "-D", "-e", "-f", str(config)]
        self.daemon = Daemon("sshd", argv, lambda: port_open(self.port), folder / "sshd.log")

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def host_fingerprint(self) -> str:
        return fingerprint(Path(f"{self.host_key}.pub"))

    @property
    def private_key(self) -> str:
        return self.client_key.read_text()

    def start(self) -> SshServer:
        self.daemon.start()
        return self

    def stop(self) -> None:
        self._signal_sessions(signal.SIGKILL, listener=False)
        self.daemon.stop()

    def kill(self) -> None:
        """The server dies at once, connections and all, as in a crash."""
        self._signal_sessions(signal.SIGKILL)
        self.daemon.kill()

    def open_files(self) -> list[str]:
        """The paths the server's processes (its connections') hold open now."""
        proc = self.daemon.proc
        if proc is None:
            return []
        held = []
        for pid in _descendants(proc.pid):
            with contextlib.suppress(OSError):
                for fd in os.listdir(f"/proc/{pid}/fd"):
                    with contextlib.suppress(OSError):
                        held.append(os.readlink(f"/proc/{pid}/fd/{fd}"))
        return held

    def sessions(self) -> int:
        """How many processes serve connections now (each connection has its own)."""
        proc = self.daemon.proc
        return 0 if proc is None or proc.poll() is not None else len(_descendants(proc.pid))

    @contextlib.contextmanager
    def paused(self) -> Iterator[None]:
        """The server and its connections hang (SIGSTOP): nothing answers."""
        pids = self._signal_sessions(signal.SIGSTOP)
        try:
            yield
        finally:
            for pid in pids:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGCONT)

    def _signal_sessions(self, sig: signal.Signals, *, listener: bool = True) -> list[int]:
        """Send ``sig`` to every process below the listener (and to the listener
        itself unless told not to); the pids signalled."""
        proc = self.daemon.proc
        if proc is None or proc.poll() is not None:
            return []
        os.kill(proc.pid, signal.SIGSTOP)  # no new connection forks while we look
        pids = [*([proc.pid] if listener else []), *_descendants(proc.pid)]
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, sig)
        if sig != signal.SIGSTOP or not listener:
            with contextlib.suppress(ProcessLookupError):
                os.kill(proc.pid, signal.SIGCONT)
        return pids


def _descendants(root: int) -> list[int]:
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        parent = int(stat.rpartition(")")[2].split()[1])
        children.setdefault(parent, []).append(int(entry))
    found: list[int] = []
    pending = [root]
    while pending:
        for child in children.get(pending.pop(), []):
            found.append(child)
            pending.append(child)
    return found


def password_login() -> PasswordLogin:
    """A system account with a fresh random password and a folder of its own in /tmp.

    The account is made with ``useradd`` when the machine lacks it (home in /tmp, no
    login shell needed for SFTP); its password is set anew each time.
    """
    try:
        pwd.getpwnam(PASSWORD_USER)
    except KeyError:
        subprocess.run(
            [
                "useradd",
                "--system",
                "--no-create-home",
                "--home-dir",
                f"/tmp/{PASSWORD_USER}",
                "--shell",
                "/bin/sh",
                PASSWORD_USER,
            ],
            check=True,
        )
    password = secrets.token_urlsafe(12)
    subprocess.run(["chpasswd"], input=f"{PASSWORD_USER}:{password}\n", text=True, check=True)
    account = pwd.getpwnam(PASSWORD_USER)
    folder = Path(tempfile.mkdtemp(prefix="manifold-sftp-"))
    folder.chmod(0o755)
    os.chown(folder, account.pw_uid, account.pw_gid)
    return PasswordLogin(PASSWORD_USER, password, folder)
