"""rclone's crypt format, piece by piece: the values here were made by rclone 1.75.2
itself (``rclone cryptdecode --reverse``, ``rclone rcat``, ``rclone obscure``) with the
password ``correct horse`` and the salt ``battery staple``; the test modules of the
driver check the same both ways against the running binary."""

from __future__ import annotations

import os

import pytest

from manifold.drivers.crypt.blocks import (
    BLOCK_SIZE,
    DATA_SIZE,
    HEADER_SIZE,
    BadBlock,
    BadFile,
    derive_keys,
    encrypted_size,
    header_nonce,
    nonce_at,
    open_blocks,
    plain_size,
    seal_blocks,
)
from manifold.drivers.crypt.eme import Eme
from manifold.drivers.crypt.encodings import ENCODINGS
from manifold.drivers.crypt.names import Names, NotEncrypted
from manifold.drivers.crypt.obscure import MARKER, obscure, plain, reveal, stored

KEYS = derive_keys("correct horse", "battery staple")
NAMES = ["hello.txt", "文件 ü", "exactly16bytes!!", "report-v2023-01-02-150405-000.txt"]
# What rclone stores for NAMES, by (filename_encryption, filename_encoding).
STORED = {
    ("standard", "base32"): [
        "k54lhd6n10sdhjsku503osnfss",
        "lfqvji0js4qh5154e8ghvg0nak",
        "4rdc0hgbr78p50cpgs0ks2cmrkmemjtn1pq26iu9jaslv3ciee8g",
        "9mg2q821o5l0tdr3de8611tfpk-v2023-01-02-150405-000",
    ],
    ("standard", "base64"): [
        "oUlYtNcIONjPlPFAPHLv5w",
        "q_X5yBPhNRKEpHIhH8AXVQ",
        "JtrARgvZ0ZKBmYcBTgmW3SzrT7cOdCNLyZq5X42Sc5E",
        "TaAtIEHBag63Y2uQYIevzQ-v2023-01-02-150405-000",
    ],
    ("standard", "base32768"): [
        "眄粍䄡ᔍ泜稥ڸ饏驟",
        "籚ꕲᎼ㦑㩥㠈梟晷兟",
        "㦭噱柛䍙㩌豼Ꮬ✶银愳鵁趢䂞䲪餟⻒怨ʟ",
        "䴐⥈◘㳠鰛㇎䜁╏赟-v2023-01-02-150405-000",
    ],
    ("obfuscate", "base32"): [
        "162.GDKKN.SWS",
        "153.斤专 ã",
        "202.tMprIAN27qNItH!!!!",
        "42.wjutwy-v2023-01-02-150405-000.yCy",
    ],
}
# ``rclone rcat`` of "hello, world\n": its header (with the nonce it drew) and block.
HELLO = bytes.fromhex(
    "52434c4f4e4500003a57bcb1cd4d521f283bad507be06a479334a0e004482ecf7708b21d00ad3b275e"
    "48d7b233df0a0f79f7effacea3058eef832bfdd1"
)


def names(mode: str, encoding: str = "base32", dirs: bool = True) -> Names:
    return Names(mode, dirs, ENCODINGS[encoding], ".bin", KEYS.name, KEYS.tweak)


@pytest.mark.parametrize(("mode", "encoding"), list(STORED))
def test_names_are_stored_as_rclone_stores_them(mode: str, encoding: str) -> None:
    cipher = names(mode, encoding)
    assert [cipher.file_name(n) for n in NAMES] == STORED[mode, encoding]
    assert [cipher.plain_file_name(s) for s in STORED[mode, encoding]] == NAMES


def test_the_default_salt_is_rclones() -> None:
    keys = derive_keys("correct horse", "")
    cipher = Names("standard", True, ENCODINGS["base32"], ".bin", keys.name, keys.tweak)
    assert cipher.file_name("hello.txt") == "csqompq3f0md781c3ngsvbh2ko"


def test_off_mode_adds_the_suffix_and_keeps_folders() -> None:
    cipher = names("off")
    assert (cipher.file_name("a.txt"), cipher.dir_name("dir")) == ("a.txt.bin", "dir")
    assert cipher.plain_file_name("a.txt.bin") == "a.txt"
    for foreign in ("a.txt", ".bin", "-v2023-01-02-150405-000.bin"):
        with pytest.raises(NotEncrypted):
            cipher.plain_file_name(foreign)


def test_folder_names_follow_directory_name_encryption() -> None:
    assert names("standard", dirs=False).dir_name("photos") == "photos"
    assert names("standard").dir_name("hello.txt") == STORED["standard", "base32"][0]
    assert names("standard").plain_dir_name(STORED["standard", "base32"][0]) == "hello.txt"


@pytest.mark.parametrize("stored_name", ["README.md", "k54lhd6n10sdhjsku503osnfsa", "0" * 26, ""])
def test_names_another_key_made_do_not_decrypt(stored_name: str) -> None:
    with pytest.raises(NotEncrypted):
        names("standard").plain_file_name(stored_name)


def test_a_wrong_password_decrypts_no_name() -> None:
    other = derive_keys("wrong horse", "battery staple")
    wrong = Names("standard", True, ENCODINGS["base32"], ".bin", other.name, other.tweak)
    for stored_name in STORED["standard", "base32"][:3]:
        with pytest.raises(NotEncrypted):
            wrong.plain_file_name(stored_name)


@pytest.mark.parametrize("encoding", sorted(ENCODINGS))
def test_encodings_round_trip_every_length(encoding: str) -> None:
    spelling = ENCODINGS[encoding]
    for length in range(0, 70):
        data = os.urandom(length)
        assert spelling.decode(spelling.encode(data)) == data


@pytest.mark.parametrize(
    ("encoding", "text"),
    [("base32", "k54="), ("base32", "K5!"), ("base64", "a"), ("base64", "ab=c"),
     ("base32768", "abc"), ("base32768", "ʟ眄")],
)  # fmt: skip
def test_bad_spellings_are_refused(encoding: str, text: str) -> None:
    with pytest.raises(ValueError):
        ENCODINGS[encoding].decode(text)


def test_base32768_spells_fifteen_bits_a_character() -> None:
    spelling = ENCODINGS["base32768"]
    assert [len(spelling.encode(bytes(n))) for n in (1, 2, 15, 16, 30)] == [1, 2, 8, 9, 16]


def test_eme_is_a_permutation_that_mixes_the_whole_name() -> None:
    eme = Eme(KEYS.name, KEYS.tweak)
    first, second = bytes(48), bytes(47) + b"\x01"
    assert eme.decrypt(eme.encrypt(first)) == first
    sealed_first, sealed_second = eme.encrypt(first), eme.encrypt(second)
    assert all(sealed_first[i : i + 16] != sealed_second[i : i + 16] for i in (0, 16, 32))
    with pytest.raises(ValueError):
        eme.encrypt(bytes(15))


def test_rclones_file_opens_and_seals_back_the_same() -> None:
    nonce = header_nonce(HELLO[:HEADER_SIZE])
    assert open_blocks(KEYS.data, nonce, 0, HELLO[HEADER_SIZE:]) == b"hello, world\n"
    assert HELLO[:HEADER_SIZE] + seal_blocks(KEYS.data, nonce, 0, b"hello, world\n") == HELLO


def test_blocks_open_from_any_index() -> None:
    data = os.urandom(3 * DATA_SIZE + 5)
    nonce = os.urandom(24)
    sealed = seal_blocks(KEYS.data, nonce, 0, data)
    assert open_blocks(KEYS.data, nonce, 2, sealed[2 * BLOCK_SIZE :]) == data[2 * DATA_SIZE :]
    with pytest.raises(BadBlock):
        open_blocks(KEYS.data, nonce, 1, sealed[2 * BLOCK_SIZE :])


def test_nonces_carry_across_all_bytes() -> None:
    assert nonce_at(b"\xff" * 8 + bytes(16), 1) == bytes(8) + b"\x01" + bytes(15)
    assert nonce_at(b"\xff" * 24, 2) == b"\x01" + bytes(23)


@pytest.mark.parametrize("size", [0, 1, DATA_SIZE - 1, DATA_SIZE, DATA_SIZE + 1, 10 * 2**30])
def test_sizes_convert_both_ways(size: int) -> None:
    assert plain_size(encrypted_size(size)) == size


@pytest.mark.parametrize("size", [0, 31, HEADER_SIZE + 16, HEADER_SIZE + BLOCK_SIZE + 3])
def test_sizes_no_encrypted_file_has_are_refused(size: int) -> None:
    with pytest.raises(BadFile):
        plain_size(size)


def test_headers_need_rclones_magic() -> None:
    with pytest.raises(BadFile):
        header_nonce(b"RCLONE\x00\x01" + bytes(24))


def test_obscured_values_are_rclones() -> None:
    assert reveal("YLYrK1Yv1ES1jlPrXJUtnFwWPmKgDftDSr71K3Q") == "correct horse"
    assert obscure("pw", bytes(16)).startswith("AAAAAAAAAAAAAAAAAAAAA")  # the IV in front
    assert reveal(obscure("pässword")) == "pässword"


def test_stored_passwords_are_obscured_once() -> None:
    kept = stored("correct horse")
    assert kept.startswith(MARKER) and "correct" not in kept
    assert (stored(kept), plain(kept), plain("typed in")) == (kept, "correct horse", "typed in")
