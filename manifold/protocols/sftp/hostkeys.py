"""The SFTP server's host keys, made once into ``<data dir>/ssh/`` and kept.

As AList: an RSA key (4096 bits, PKCS#1 PEM) at ``ssh/ssh_host_rsa_key`` with its
``.pub`` beside it; here also an Ed25519 key (``ssh_host_ed25519_key``, OpenSSH
format), which current clients prefer. The folder is ``0700`` and the private files
``0600``, written to a temporary name and renamed, so a crash never leaves half a
key. A private file that cannot be read as a key is set aside (``.invalid``), never
overwritten, and a new key is made in its place, as AList makes one.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

import asyncssh

from manifold.concurrency import CPU_POOL, run_in
from manifold.config import make_private

logger = logging.getLogger(__name__)

# (file name, algorithm, key size or None, export format)
_KEYS = (
    ("ssh_host_ed25519_key", "ssh-ed25519", None, "openssh"),
    ("ssh_host_rsa_key", "ssh-rsa", 4096, "pkcs1-pem"),
)


async def host_keys(data_dir: Path) -> list[asyncssh.SSHKey]:
    """The host keys kept in ``data_dir/ssh``, each made the first time it is missing."""
    return await run_in(CPU_POOL, _load_or_make_all, data_dir / "ssh")


def _load_or_make_all(folder: Path) -> list[asyncssh.SSHKey]:
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    make_private(folder)
    return [_load_or_make(folder / name, alg, size, fmt) for name, alg, size, fmt in _KEYS]


def _load_or_make(path: Path, algorithm: str, size: int | None, fmt: str) -> asyncssh.SSHKey:
    if path.exists():
        try:
            key = asyncssh.read_private_key(path)
        except (OSError, ValueError) as exc:
            logger.warning("host key %s unreadable (%s): set aside, a new one made", path, exc)
            os.replace(path, path.with_name(path.name + ".invalid"))
        else:
            make_private(path)
            return key
    if size:
        key = asyncssh.generate_private_key(algorithm, key_size=size)
    else:
        key = asyncssh.generate_private_key(algorithm)
    _write(path, key.export_private_key(fmt), 0o600)
    _write(path.with_name(path.name + ".pub"), key.export_public_key(), 0o644)
    logger.info("made the SFTP host key %s", path)
    return key


def _write(path: Path, data: bytes, mode: int) -> None:
    temp = path.with_name(path.name + ".tmp")
    fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    with os.fdopen(fd, "wb") as handle:
        handle.write(data)
    os.chmod(temp, mode)  # the umask may have taken bits the public file should have
    os.replace(temp, path)
