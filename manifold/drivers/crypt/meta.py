"""Crypt options and static configuration, as AList's Crypt driver has them."""

from __future__ import annotations

from pydantic import BaseModel

from manifold.drivers.base import DriverConfig, option

CONFIG = DriverConfig(
    name="Crypt",
    local_sort=True,
    only_proxy=True,  # the bytes are decrypted here: no link to hand a client
    no_cache=True,
    default_root="/",
)


class Addition(BaseModel):
    filename_encryption: str = option(
        "off", type="select", options="off,standard,obfuscate", required=True
    )
    directory_name_encryption: str = option(
        "false", type="select", options="false,true", required=True
    )
    remote_path: str = option(..., required=True, help="This is where the encrypted data stores")
    password: str = option(..., required=True, help="the main password")
    salt: str = option(
        "",
        help="If you don't know what is salt, treat it as a second password. "
        "Optional but recommended",
    )
    encrypted_suffix: str = option(
        ".bin",
        required=True,
        help="for advanced user only! encrypted files will have this suffix",
    )
    filename_encoding: str = option(
        "base64",
        type="select",
        options="base64,base32,base32768",
        required=True,
        help="for advanced user only!",
    )
    thumbnail: bool = option(
        False,
        required=True,
        help="enable thumbnail which pre-generated under .thumbnails folder",
    )
    show_hidden: bool = option(True, help="show hidden directories and files")
