from __future__ import annotations

import json
import stat
from pathlib import Path

import pytest

from manifold.config import Config, ConfigError, Secret, describe, load_config


def read_file(data_dir: Path) -> dict[str, object]:
    loaded: dict[str, object] = json.loads((data_dir / "config.json").read_text("utf-8"))
    return loaded


def test_first_load_writes_the_file_with_a_secret(tmp_path: Path) -> None:
    config = load_config(tmp_path / "data", env={})
    stored = read_file(tmp_path / "data")
    assert stored["jwt_secret"] == config.jwt_secret.reveal()
    assert len(config.jwt_secret.reveal()) >= 32
    assert stored["port"] == 5244
    assert stored["token_expires_in"] == 48


def test_secret_is_kept_across_loads(tmp_path: Path) -> None:
    first = load_config(tmp_path, env={})
    second = load_config(tmp_path, env={})
    assert second.jwt_secret.reveal() == first.jwt_secret.reveal()


def test_secrets_differ_between_data_folders(tmp_path: Path) -> None:
    one = load_config(tmp_path / "one", env={})
    two = load_config(tmp_path / "two", env={})
    assert one.jwt_secret.reveal() != two.jwt_secret.reveal()


def test_config_file_is_private(tmp_path: Path) -> None:
    load_config(tmp_path, env={})
    mode = stat.S_IMODE((tmp_path / "config.json").stat().st_mode)
    assert mode == 0o600


def test_file_values_are_read(tmp_path: Path) -> None:
    load_config(tmp_path, env={})
    stored = read_file(tmp_path)
    stored["port"] = 6000
    stored["site_url"] = "https://files.example.org"
    (tmp_path / "config.json").write_text(json.dumps(stored), "utf-8")
    config = load_config(tmp_path, env={})
    assert (config.port, config.site_url) == (6000, "https://files.example.org")


def test_env_overrides_port(tmp_path: Path) -> None:
    config = load_config(tmp_path, env={"MANIFOLD_PORT": "8080"})
    assert config.port == 8080


def test_env_override_is_not_written_to_the_file(tmp_path: Path) -> None:
    load_config(tmp_path, env={"MANIFOLD_PORT": "8080"})
    assert read_file(tmp_path)["port"] == 5244


def test_env_list_is_split_on_commas(tmp_path: Path) -> None:
    env = {"MANIFOLD_TRUSTED_PROXIES": "10.0.0.0/8, 192.168.0.0/16,"}
    config = load_config(tmp_path, env=env)
    assert config.trusted_proxies == ["10.0.0.0/8", "192.168.0.0/16"]


def test_env_without_prefix_is_ignored(tmp_path: Path) -> None:
    config = load_config(tmp_path, env={"PORT": "1", "ALIST_PORT": "2"})
    assert config.port == 5244


def test_bad_int_in_env(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as caught:
        load_config(tmp_path, env={"MANIFOLD_PORT": "eighty"})
    assert str(caught.value) == "environment: port must be a whole number, got 'eighty'"


def test_bad_int_in_file(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text('{"max_login_failures": "many"}', "utf-8")
    with pytest.raises(ConfigError, match="max_login_failures must be a whole number"):
        load_config(tmp_path, env={})


def test_fractional_int_in_file(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text('{"port": 80.5}', "utf-8")
    with pytest.raises(ConfigError, match="port must be a whole number"):
        load_config(tmp_path, env={})


def test_empty_jwt_secret_from_env_is_not_used(tmp_path: Path) -> None:
    try:
        config = load_config(tmp_path, env={"MANIFOLD_JWT_SECRET": ""})
    except ConfigError:
        return
    assert config.jwt_secret.reveal() != ""


def test_file_that_is_not_json(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text("{not json", "utf-8")
    with pytest.raises(ConfigError, match="cannot read config file"):
        load_config(tmp_path, env={})


def test_file_that_is_not_an_object(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text("[1, 2]", "utf-8")
    with pytest.raises(ConfigError, match="must hold a JSON object"):
        load_config(tmp_path, env={})


def test_unwritable_data_folder(tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("x", "utf-8")
    with pytest.raises(ConfigError, match="is not writable"):
        load_config(blocker / "data", env={})


def test_secret_never_shows_its_value() -> None:
    secret = Secret("hunter2-value")
    for shown in (repr(secret), str(secret), f"{secret}", f"{secret!r}"):
        assert "hunter2" not in shown
    assert secret.reveal() == "hunter2-value"


def test_config_repr_hides_the_jwt_secret(tmp_path: Path) -> None:
    config = load_config(tmp_path, env={"MANIFOLD_JWT_SECRET": "very-private-jwt-key"})
    assert config.jwt_secret.reveal() == "very-private-jwt-key"
    assert "very-private-jwt-key" not in repr(config)


def test_secrets_compare_by_value() -> None:
    assert Secret("a") == Secret("a")
    assert Secret("a") != Secret("b")
    assert Secret("a") != "a"


def test_describe_masks_secret_and_database_password(tmp_path: Path) -> None:
    config = Config(
        data_dir=tmp_path,
        jwt_secret=Secret("jwt-value"),
        database_url="postgresql+asyncpg://app:db-pass@db.example.org/manifold",
    )
    shown = describe(config)
    assert shown["jwt_secret"] == "**********"
    assert shown["database_url"] == "postgresql+asyncpg://app:***@db.example.org/manifold"
    assert "jwt-value" not in json.dumps(shown) and "db-pass" not in json.dumps(shown)


def test_every_key_is_in_the_configuration_table(tmp_path: Path) -> None:
    readme = (Path(__file__).parents[2] / "docs" / "install-and-configure.md").read_text("utf-8")
    for key in read_file_keys(tmp_path):
        assert f"| `{key}` |" in readme, key


def test_max_request_body_comes_from_the_environment(tmp_path: Path) -> None:
    config = load_config(tmp_path / "data", env={"MANIFOLD_MAX_REQUEST_BODY": "1024"})
    assert config.max_request_body == 1024
    assert load_config(tmp_path / "other", env={}).max_request_body == 4 << 20


def read_file_keys(tmp_path: Path) -> list[str]:
    load_config(tmp_path / "keys", env={})
    return list(read_file(tmp_path / "keys"))
