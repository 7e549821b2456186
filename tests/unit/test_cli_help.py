"""`manifold server --help` names the protocol servers' config keys."""

from __future__ import annotations

import pytest

from manifold.cli import main


def test_server_help_names_each_protocol_key(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["server", "--help"])
    assert exit_info.value.code == 0
    shown = capsys.readouterr().out
    for key, variable in (
        ("webdav", "MANIFOLD_WEBDAV"),
        ("sftp_port", "MANIFOLD_SFTP_PORT"),
        ("ftp_port", "MANIFOLD_FTP_PORT"),
        ("s3_port", "MANIFOLD_S3_PORT"),
    ):
        assert key in shown
        assert variable in shown
