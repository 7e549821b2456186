"""The FTP servers the FTP driver is tested against: pyftpdlib and vsftpd.

Each runs as a ``Daemon`` on a private port with its files in a folder of its own
(``root``), which the tests read directly to see what a failed call left behind.
vsftpd logs in a local system user (created once, if missing) jailed in ``root``.
"""

from __future__ import annotations

import contextlib
import os
import pwd
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import textwrap
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from tests.fixtures.processes import Daemon, free_port, port_open

PYFTPD_SCRIPT = """\
import logging
import shutil
import sys

from pyftpdlib.authorizers import DummyAuthorizer
from pyftpdlib.handlers import FTPHandler
from pyftpdlib.servers import FTPServer

port, root, user, password, low = sys.argv[1:6]
logging.basicConfig(level=logging.INFO, stream=sys.stdout, format="%(message)s")
authorizer = DummyAuthorizer()
authorizer.add_user(user, password, root, perm="elradfmwMT")
authorizer.add_user("reader", password, root, perm="elr")


# pyftpdlib with AVBL (the draft's free space of a folder), which some servers
# answer and neither pyftpdlib nor vsftpd does.
class Handler(FTPHandler):

    proto_cmds = {
        **FTPHandler.proto_cmds,
        "AVBL": dict(perm=None, auth=True, arg=None, help="Syntax: AVBL [<SP> path]"),
    }

    def ftp_AVBL(self, line):
        path = self.fs.ftp2fs(line or self.fs.cwd)
        if not self.fs.isdir(path):
            self.respond("550 Not a folder.")
            return
        self.respond(f"213 {shutil.disk_usage(path).free}")


Handler.authorizer = authorizer
Handler.passive_ports = range(int(low), int(low) + 200)
FTPServer(("127.0.0.1", int(port)), Handler).serve_forever()
"""

VSFTPD_USER = "manifoldftp"
VSFTPD_HOME = Path("/var/lib/manifoldftp")
VSFTPD_BINARY = "/usr/sbin/vsftpd"
SECURE_CHROOT = Path("/var/run/vsftpd/empty")


@dataclass
class FtpServer:
    """One running FTP server: where it listens, who may log in, where its files are."""

    kind: str
    port: int
    root: Path
    user: str
    password: str
    daemon: Daemon
    log_path: Path
    # A certificate the server offers after AUTH TLS (vsftpd only), and its CA.
    ca_file: Path | None = None
    # Text in the command line of every process of this server (vsftpd's sessions leave
    # the daemon's process group, so killing the group does not reach them).
    marker: str = ""
    # A user who may only read (pyftpdlib only), with the same password.
    reader: str = ""
    cleanup: list[Path] = field(default_factory=list)

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def logins(self) -> int:
        """Logins the server's log records."""
        text = self.log_path.read_text(errors="replace") if self.log_path.exists() else ""
        return text.count("OK LOGIN" if self.kind == "vsftpd" else "logged in")

    def files(self) -> list[str]:
        """Every path under the root (relative, sorted): what the server holds."""
        return sorted(str(p.relative_to(self.root)) for p in self.root.rglob("*"))

    def crash(self) -> None:
        """Every process of the server dies at once, sessions included."""
        self.daemon.kill()
        self._kill_sessions()

    def start(self) -> None:
        self.daemon.start()

    def stop(self) -> None:
        self.daemon.stop()
        self._kill_sessions()
        for path in self.cleanup:
            shutil.rmtree(path, ignore_errors=True)

    @contextlib.contextmanager
    def frozen(self) -> Iterator[None]:
        """Every process of the server stops answering, its connections left open."""
        with self.daemon.paused():
            self._signal_sessions(signal.SIGSTOP)
            try:
                yield
            finally:
                self._signal_sessions(signal.SIGCONT)

    def _kill_sessions(self) -> None:
        self._signal_sessions(signal.SIGKILL)

    def _signal_sessions(self, sig: signal.Signals) -> None:
        if not self.marker:
            return
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            try:
                if self.marker.encode() in (entry / "cmdline").read_bytes():
                    os.kill(int(entry.name), sig)
            except OSError:
                continue


def pyftpdlib_server(workdir: Path) -> FtpServer:
    workdir.mkdir(parents=True, exist_ok=True)
    root = workdir / "root"
    root.mkdir()
    script = workdir / "pyftpd.py"
    script.write_text(PYFTPD_SCRIPT)
    port, password = free_port(), "pw-" + os.urandom(6).hex()
    low = random.randrange(20000, 60000, 200)
    log = workdir / "pyftpd.log"
    argv = [sys.executable, "-u", str(script), str(port), str(root), "tester", password, str(low)]
    daemon = Daemon("pyftpdlib", argv, lambda: port_open(port), log)
    daemon.start()
    return FtpServer("pyftpdlib", port, root, "tester", password, daemon, log, reader="reader")


def _system_user(password: str) -> pwd.struct_passwd:
    """The local user vsftpd logs in (PAM checks its password and its shell)."""
    try:
        entry = pwd.getpwnam(VSFTPD_USER)
    except KeyError:
        options = "--system --no-create-home --shell /bin/bash --home-dir"
        subprocess.run(
            ["useradd", *options.split(), str(VSFTPD_HOME), VSFTPD_USER],
            check=True,
            capture_output=True,
        )
        entry = pwd.getpwnam(VSFTPD_USER)
    # vsftpd enters the user's home before its local_root.
    Path(entry.pw_dir).mkdir(parents=True, exist_ok=True)
    subprocess.run(
        ["chpasswd"], input=f"{VSFTPD_USER}:{password}\n".encode(), check=True, capture_output=True
    )
    return entry


def _certificate(folder: Path) -> tuple[Path, Path, Path]:
    """A CA and a certificate for 127.0.0.1 signed by it: (CA, certificate, key)."""
    ca_key, ca, key, csr, cert = (
        folder / n for n in ("ca.key", "ca.pem", "server.key", "server.csr", "server.pem")
    )
    ext = folder / "ext.cnf"
    ext.write_text("subjectAltName=IP:127.0.0.1\n")
    for command in (
        f"req -x509 -newkey rsa:2048 -nodes -keyout {ca_key} -out {ca} -days 2",
        f"req -newkey rsa:2048 -nodes -keyout {key} -out {csr}",
        f"x509 -req -in {csr} -CA {ca} -CAkey {ca_key} -CAcreateserial -out {cert} -days 2"
        f" -extfile {ext}",
    ):
        subject = ["-subj", "/CN=manifold test"] if command.startswith("req") else []
        subprocess.run(["openssl", *command.split(), *subject], check=True, capture_output=True)
    return ca, cert, key


def vsftpd_server(workdir: Path) -> FtpServer:
    workdir.mkdir(parents=True, exist_ok=True)
    password = "pw-" + os.urandom(6).hex()
    user = _system_user(password)
    SECURE_CHROOT.mkdir(parents=True, exist_ok=True)
    # Outside the test's own temporary folders: vsftpd enters the root as the user,
    # so every folder above it must be searchable by that user.
    home = Path(tempfile.mkdtemp(prefix="manifold-vsftpd-"))
    home.chmod(0o755)
    root = home / "root"
    root.mkdir()
    os.chown(root, user.pw_uid, user.pw_gid)
    ca, cert, key = _certificate(workdir)
    port, log, out = free_port(), workdir / "vsftpd.log", workdir / "vsftpd.out"
    conf = workdir / "vsftpd.conf"
    conf.write_text(
        textwrap.dedent(
            f"""\
            listen=YES
            listen_address=127.0.0.1
            listen_port={port}
            background=NO
            seccomp_sandbox=NO
            anonymous_enable=NO
            local_enable=YES
            write_enable=YES
            local_umask=022
            local_root={root}
            chroot_local_user=YES
            allow_writeable_chroot=YES
            userlist_enable=NO
            pam_service_name=vsftpd
            secure_chroot_dir={SECURE_CHROOT}
            use_localtime=NO
            utf8_filesystem=YES
            xferlog_enable=YES
            xferlog_std_format=NO
            vsftpd_log_file={log}
            log_ftp_protocol=YES
            max_per_ip=0
            max_clients=0
            ssl_enable=YES
            allow_anon_ssl=NO
            force_local_logins_ssl=NO
            force_local_data_ssl=NO
            rsa_cert_file={cert}
            rsa_private_key_file={key}
            """
        )
    )
    daemon = Daemon("vsftpd", [VSFTPD_BINARY, str(conf)], lambda: port_open(port), out)
    daemon.start()
    server = FtpServer(
        "vsftpd", port, root, VSFTPD_USER, password, daemon, log, ca_file=ca, marker=str(conf)
    )
    server.cleanup.append(home)
    return server
