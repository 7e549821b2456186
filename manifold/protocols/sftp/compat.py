"""Tolerance for a client bug that OpenSSH's server lets pass and asyncssh does not.

The Go SFTP client that rclone (1.60 and others) is built on sends the last, short
block of an upload in a write request padded to its whole buffer: the data's own
length is right, but the request carries the rest of the buffer after it. OpenSSH's
server reads the fields and ignores what follows; asyncssh refuses the request as a
bad message, and the upload fails. Write requests are therefore read here down to
their data and passed on without the padding; every other request is untouched.
"""

from __future__ import annotations

from typing import Any

from asyncssh.constants import FXP_WRITE
from asyncssh.packet import SSHPacket, String, UInt64
from asyncssh.sftp import SFTPServerHandler

_HANDLERS: dict[Any, Any] = SFTPServerHandler._packet_handlers
_STRICT_WRITE = _HANDLERS[FXP_WRITE]


async def _write_without_padding(handler: SFTPServerHandler, packet: SSHPacket) -> Any:
    handle = packet.get_string()
    offset = packet.get_uint64()
    data = packet.get_string()
    return await _STRICT_WRITE(handler, SSHPacket(String(handle) + UInt64(offset) + String(data)))


def tolerate_padded_writes() -> None:
    """Install the tolerant reading of write requests (once; later calls do nothing)."""
    _HANDLERS[FXP_WRITE] = _write_without_padding
