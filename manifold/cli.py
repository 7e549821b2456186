"""The command line: ``manifold server | admin | cancel2fa``.

Every failure a user can cause prints one clear line to stderr and exits non-zero.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import errno
import socket
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path

from manifold import VERSION_STRING, logs
from manifold.config import Config, ConfigError, load_config
from manifold.container import Services
from manifold.errors import ManifoldError
from manifold.services.auth.changes import UserChanges
from manifold.services.auth.users import random_password

EXIT_USAGE = 2
EXIT_FAILURE = 1


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        result: int = args.handler(args)
        return result
    except (ConfigError, ManifoldError, OSError) as exc:
        sys.stderr.write(f"manifold: {_one_line(exc)}\n")
        return EXIT_FAILURE
    except KeyboardInterrupt:
        return EXIT_FAILURE


def _one_line(exc: BaseException) -> str:
    text = getattr(exc, "message", None) or str(exc) or type(exc).__name__
    return str(text).splitlines()[0]


_PROTOCOLS_HELP = """\
protocol servers (config keys; environment variables MANIFOLD_<KEY>):
  webdav     WebDAV at /dav on the main port (true; MANIFOLD_WEBDAV=false turns it off)
  sftp_port  SFTP server port (0 = off; e.g. MANIFOLD_SFTP_PORT=5222)
  ftp_port   FTP/FTPS server port (0 = off; e.g. MANIFOLD_FTP_PORT=5221)
  s3_port    S3 server port (0 = off; e.g. MANIFOLD_S3_PORT=5246)
They listen on `address` (--host). See docs/protocols.md for each server's settings.
"""


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="manifold", description="Storage aggregation server")
    parser.add_argument("--version", action="version", version=f"manifold {VERSION_STRING}")
    commands = parser.add_subparsers(dest="command", required=True)

    server = commands.add_parser(
        "server",
        help="run the server",
        description="Run the server. Settings come from DATA/config.json, overridden by "
        "MANIFOLD_<KEY> environment variables.",
        epilog=_PROTOCOLS_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    _data_option(server)
    server.add_argument("--host", help="address to listen on (default from config, 0.0.0.0)")
    server.add_argument("--port", type=int, help="port to listen on (default from config, 5244)")
    server.add_argument(
        "--no-ui", action="store_true", help="serve the API only, without the web interface"
    )
    server.add_argument(
        "--workers", type=int, help="processes sharing the port (default from config, 1)"
    )
    server.set_defaults(handler=_server)

    backup = commands.add_parser("backup", help="write the database and config to a file")
    _data_option(backup)
    backup.add_argument("--out", type=Path, help="backup file (default manifold-backup-*.jsonl)")
    backup.set_defaults(handler=_backup)

    restore = commands.add_parser("restore", help="load a backup into an empty database")
    restore.add_argument("file", type=Path)
    _data_option(restore)
    restore.add_argument(
        "--force", action="store_true", help="replace what a non-empty database holds"
    )
    restore.set_defaults(handler=_restore)

    alist = commands.add_parser(
        "import-alist", help="import storages, users, metas and settings from AList v3"
    )
    alist.add_argument("file", type=Path, help="AList backup JSON, or AList's data.db")
    _data_option(alist)
    alist.add_argument(
        "--table-prefix", default="x_", help="table prefix of AList's database (default x_)"
    )
    alist.set_defaults(handler=_import_alist)

    admin = commands.add_parser("admin", help="show or change the admin account")
    _data_option(admin)
    admin.set_defaults(handler=_admin_show)
    actions = admin.add_subparsers(dest="action")
    set_cmd = actions.add_parser("set", help="set the admin password")
    set_cmd.add_argument("password")
    _data_option(set_cmd)
    set_cmd.set_defaults(handler=_admin_set)
    random_cmd = actions.add_parser("random", help="set a random admin password")
    _data_option(random_cmd)
    random_cmd.set_defaults(handler=_admin_random)
    token_cmd = actions.add_parser("token", help="print the permanent admin token")
    _data_option(token_cmd)
    token_cmd.set_defaults(handler=_admin_token)

    cancel = commands.add_parser("cancel2fa", help="turn off the admin's two-factor login")
    _data_option(cancel)
    cancel.set_defaults(handler=_cancel2fa)
    return parser


def _data_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--data", default=argparse.SUPPRESS, help="data folder (default ./data)", type=Path
    )


def _config(args: argparse.Namespace) -> Config:
    return load_config(getattr(args, "data", Path("data")))


def _server(args: argparse.Namespace) -> int:
    import uvicorn

    from manifold.app import create_app
    from manifold.server import tune_collector, uvicorn_config

    config = _config(args)
    if args.host:
        config.address = args.host
    if args.port is not None:
        config.port = args.port
    if args.no_ui:
        config.ui = False
    if args.workers is not None:
        config.workers = args.workers
    refusal = cluster_refusal(config)
    if refusal:
        sys.stderr.write(f"manifold: {refusal}\n")
        return EXIT_USAGE
    if config.workers < 1:
        raise ConfigError(f"workers must be 1 or more, got {config.workers}")
    _check_port(config.address, config.port)
    logs.setup(config.log_level, config.log_format)
    sys.stdout.write(f"config file: {config.config_path}\n")
    sys.stdout.write(f"database: {_shown_database(config)}\n")
    sys.stdout.write(f"listening on http://{config.address}:{config.port}\n")
    sys.stdout.flush()
    if config.workers > 1:
        from manifold import workers

        sys.stdout.write(f"workers: {config.workers}\n")
        sys.stdout.flush()
        return workers.run(config, config.workers)
    server = uvicorn.Server(uvicorn_config(create_app(config), config))
    tune_collector()
    # uvicorn shuts down cleanly on Ctrl-C, then raises it again; that is a normal stop.
    with contextlib.suppress(KeyboardInterrupt):
        server.run()
    return 0 if server.started else EXIT_FAILURE


def cluster_refusal(config: Config) -> str:
    """Why this config cannot run as one of several instances ("" if it can)."""
    if not config.cluster:
        return ""
    redis_url = config.redis_url
    if not config.database_url or config.effective_database_url.startswith("sqlite"):
        return "cluster: true needs a server database (database_url: PostgreSQL or MySQL)"
    if not redis_url:
        return "cluster: true needs redis_url (the instances share state through Redis)"
    return ""


def _backup(args: argparse.Namespace) -> int:
    from manifold.backup import backup, default_name

    config = _config(args)
    out: Path = args.out or Path(default_name())
    summary = asyncio.run(backup(config, out))
    sys.stdout.write(f"backup written to {out}: {summary.line()}\n")
    return 0


def _restore(args: argparse.Namespace) -> int:
    from manifold.backup import restore

    data = getattr(args, "data", Path("data"))
    if not args.file.is_file():
        raise ConfigError(f"no backup file at {args.file}")
    summary = asyncio.run(restore(data, args.file, args.force))
    sys.stdout.write(f"restored from {args.file}: {summary.line()}\n")
    UserChanges(load_config(data).data_dir).mark()
    return 0


def _import_alist(args: argparse.Namespace) -> int:
    from manifold.alist_import import import_alist, read_source

    source = read_source(args.file, args.table_prefix)

    async def work(services: Services) -> int:
        report = await import_alist(services, source)
        for line in report.lines():
            sys.stdout.write(line + "\n")
        return 0

    return _with_services(args, work, changes_users=True)


def _shown_database(config: Config) -> str:
    from manifold.config import describe

    return str(describe(config)["database_url"] or config.effective_database_url)


def _check_port(host: str, port: int) -> None:
    with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((host, port))
        except OSError as exc:
            if exc.errno == errno.EADDRINUSE:
                raise ConfigError(f"port {port} on {host} is already in use") from None
            raise ConfigError(f"cannot listen on {host}:{port}: {exc.strerror}") from None


def _with_services(
    args: argparse.Namespace,
    work: Callable[[Services], Awaitable[int]],
    changes_users: bool = False,
) -> int:
    """Run ``work`` on the database alone: no storage starts (a back end that does not
    answer must not hold up, nor hear of, an admin's recovery)."""
    config = _config(args)

    async def run() -> int:
        services = Services.build(config)
        try:
            await services.open_records()
            if services.created_admin_password:
                sys.stdout.write(f"initial admin password: {services.created_admin_password}\n")
            result = await work(services)
            if changes_users:
                # A running server caches users: it drops them on seeing this mark,
                # whatever address it listens on (nothing is asked of it over HTTP).
                UserChanges(config.data_dir).mark()
            return result
        finally:
            await services.close_records()

    return asyncio.run(run())


def _admin_show(args: argparse.Namespace) -> int:
    async def work(services: Services) -> int:
        admin = await services.users.admin()
        sys.stdout.write(f"admin user's name: {admin.username}\n")
        sys.stdout.write("set a new password with: manifold admin set NEW_PASSWORD\n")
        return 0

    return _with_services(args, work)


def _admin_set(args: argparse.Namespace) -> int:
    return _set_admin_password(args, args.password)


def _admin_random(args: argparse.Namespace) -> int:
    return _set_admin_password(args, random_password())


def _set_admin_password(args: argparse.Namespace, password: str) -> int:
    if not password:
        raise ConfigError("the password must not be empty")

    async def work(services: Services) -> int:
        admin = await services.users.admin()
        await services.users.set_password(admin, password)
        sys.stdout.write(f"admin user's name: {admin.username}\n")
        sys.stdout.write(f"admin user's password: {password}\n")
        return 0

    return _with_services(args, work, changes_users=True)


def _admin_token(args: argparse.Namespace) -> int:
    async def work(services: Services) -> int:
        sys.stdout.write(services.settings.get("token") + "\n")
        return 0

    return _with_services(args, work)


def _cancel2fa(args: argparse.Namespace) -> int:
    async def work(services: Services) -> int:
        admin = await services.users.admin()
        await services.users.set_otp_secret(admin, "")
        sys.stdout.write("two-factor authentication of the admin is now off\n")
        return 0

    return _with_services(args, work, changes_users=True)


if __name__ == "__main__":
    sys.exit(main())
