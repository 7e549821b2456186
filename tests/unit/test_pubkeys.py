from __future__ import annotations

import base64
import hashlib
import shutil
import struct
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat
from hypothesis import given
from hypothesis import strategies as st

from manifold.services.auth.pubkeys import (
    MAX_TEXT_BYTES,
    InvalidPublicKey,
    ParsedKey,
    parse_public_key,
)

KEYGEN = shutil.which("ssh-keygen")
needs_keygen = pytest.mark.skipif(KEYGEN is None, reason="ssh-keygen is not installed")


# --- building blocks -------------------------------------------------------


def ssh_string(data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + data


def wire(*fields: bytes) -> bytes:
    return b"".join(ssh_string(field) for field in fields)


def line(blob: bytes, type_word: str = "ssh-ed25519", comment: str = "") -> str:
    text = f"{type_word} {base64.b64encode(blob).decode()}"
    return f"{text} {comment}" if comment else text


def ec_point(curve: ec.EllipticCurve) -> bytes:
    key = ec.generate_private_key(curve).public_key()
    return key.public_bytes(Encoding.X962, PublicFormat.UncompressedPoint)


ED_KEY = bytes(range(32))
ED_BLOB = wire(b"ssh-ed25519", ED_KEY)
P256_POINT = ec_point(ec.SECP256R1())
P256_BLOB = wire(b"ecdsa-sha2-nistp256", b"nistp256", P256_POINT)


def fingerprint_from_keygen(pub: Path) -> str:
    assert KEYGEN is not None
    result = subprocess.run([KEYGEN, "-lf", str(pub)], check=True, capture_output=True, text=True)
    return result.stdout.split()[1]


@dataclass(frozen=True)
class Generated:
    text: str
    fingerprint: str


def generate(directory: Path, kind: str, bits: str | None, comment: str) -> Generated:
    assert KEYGEN is not None
    path = directory / f"{kind}{bits or ''}"
    args = [KEYGEN, "-q", "-t", kind, "-N", "", "-C", comment, "-f", str(path)]
    if bits:
        args += ["-b", bits]
    subprocess.run(args, check=True, capture_output=True)
    pub = path.with_suffix(".pub")
    return Generated(pub.read_text(), fingerprint_from_keygen(pub))


# --- real keys from ssh-keygen ---------------------------------------------

KEYGEN_CASES = [
    ("ed25519", None, "ssh-ed25519"),
    ("rsa", None, "ssh-rsa"),
    ("ecdsa", "256", "ecdsa-sha2-nistp256"),
    ("ecdsa", "384", "ecdsa-sha2-nistp384"),
    ("ecdsa", "521", "ecdsa-sha2-nistp521"),
    ("dsa", None, "ssh-dss"),
]


@needs_keygen
@pytest.mark.parametrize(("kind", "bits", "algorithm"), KEYGEN_CASES)
def test_generated_key_parses(tmp_path: Path, kind: str, bits: str | None, algorithm: str) -> None:
    try:
        key = generate(tmp_path, kind, bits, "alice@laptop")
    except subprocess.CalledProcessError:
        if kind == "dsa":  # newer OpenSSH builds drop DSA
            pytest.skip("this ssh-keygen cannot make DSA keys")
        raise
    parsed = parse_public_key(key.text)
    assert parsed.algorithm == algorithm
    assert parsed.fingerprint == key.fingerprint
    assert parsed.comment == "alice@laptop"
    assert parsed.blob == base64.b64decode(key.text.split()[1])


@needs_keygen
@pytest.mark.parametrize(
    ("algorithm", "fields"),
    [
        ("sk-ssh-ed25519@openssh.com", (ED_KEY, b"ssh:")),
        ("sk-ecdsa-sha2-nistp256@openssh.com", (b"nistp256", P256_POINT, b"ssh:")),
    ],
)
def test_security_key_forms_match_keygen(
    tmp_path: Path, algorithm: str, fields: tuple[bytes, ...]
) -> None:
    blob = wire(algorithm.encode(), *fields)
    text = line(blob, algorithm, "token")
    pub = tmp_path / "sk.pub"
    pub.write_text(text + "\n")
    parsed = parse_public_key(text)
    assert parsed.algorithm == algorithm
    assert parsed.fingerprint == fingerprint_from_keygen(pub)


@pytest.mark.parametrize(
    "curve", [ec.SECP256R1(), ec.SECP384R1(), ec.SECP521R1()], ids=lambda c: c.name
)
def test_ecdsa_points_from_another_library_are_on_curve(curve: ec.EllipticCurve) -> None:
    name = {"secp256r1": "nistp256", "secp384r1": "nistp384", "secp521r1": "nistp521"}
    curve_name = name[curve.name]
    algorithm = f"ecdsa-sha2-{curve_name}"
    blob = wire(algorithm.encode(), curve_name.encode(), ec_point(curve))
    assert parse_public_key(line(blob, algorithm)).algorithm == algorithm


# --- line syntax -------------------------------------------------------------


def test_fingerprint_is_unpadded_sha256_base64_of_the_blob() -> None:
    parsed = parse_public_key(line(ED_BLOB))
    digest = base64.b64encode(hashlib.sha256(ED_BLOB).digest()).decode()
    assert digest.endswith("=")  # 32 bytes: one pad character, which must be dropped
    assert parsed.fingerprint == "SHA256:" + digest.rstrip("=")


def test_comment_kept_with_inner_spaces_and_outer_ones_trimmed() -> None:
    parsed = parse_public_key("  " + line(ED_BLOB, comment="work laptop  key  ") + " \n")
    assert parsed.comment == "work laptop  key"


def test_missing_comment_is_empty() -> None:
    assert parse_public_key(line(ED_BLOB)).comment == ""


def test_tabs_separate_fields() -> None:
    text = line(ED_BLOB).replace(" ", "\t") + "\tc"
    assert parse_public_key(text).comment == "c"


@pytest.mark.parametrize(
    "options",
    [
        "no-pty",
        'from="1.2.3.4",no-pty',
        'from="10.0.0.1, 10.0.0.2",command="echo hi there",no-agent-forwarding',
        'command="echo \\"a b\\" done",restrict',
    ],
)
def test_options_prefix_accepted(options: str) -> None:
    parsed = parse_public_key(f"{options} {line(ED_BLOB, comment='me')}")
    assert (parsed.algorithm, parsed.blob, parsed.comment) == ("ssh-ed25519", ED_BLOB, "me")


def test_unclosed_quote_in_options_rejected() -> None:
    with pytest.raises(InvalidPublicKey):
        parse_public_key(f'from="1.2.3.4 {line(ED_BLOB)}')


def test_first_good_line_wins() -> None:
    other = wire(b"ssh-ed25519", bytes(32))
    text = "\n".join(
        [
            "",
            "# my keys",
            "   ",
            "this line is garbage",
            line(ED_BLOB[:-1]),  # truncated, skipped
            line(ED_BLOB, comment="first"),
            line(other, comment="second"),
        ]
    )
    parsed = parse_public_key(text)
    assert (parsed.blob, parsed.comment) == (ED_BLOB, "first")


def test_crlf_lines() -> None:
    text = "# keys\r\n" + line(ED_BLOB, comment="win") + "\r\n"
    assert parse_public_key(text).comment == "win"


def test_text_after_carriage_return_is_ignored() -> None:
    # A lone \r ends what is read of the line, like the Go reader does.
    text = line(ED_BLOB, comment="kept") + "\rhidden"
    assert parse_public_key(text).comment == "kept"


@pytest.mark.parametrize("type_word", ["ssh-rsa", "ecdsa-sha2-nistp256", "whatever"])
def test_type_word_is_not_compared_with_blob(type_word: str) -> None:
    assert parse_public_key(line(ED_BLOB, type_word)).algorithm == "ssh-ed25519"


def test_text_at_size_limit_accepted_and_over_it_rejected() -> None:
    base = line(ED_BLOB) + " "
    exact = base + "c" * (MAX_TEXT_BYTES - len(base))
    assert parse_public_key(exact).algorithm == "ssh-ed25519"
    with pytest.raises(InvalidPublicKey, match="16 KiB"):
        parse_public_key(exact + "c")


def test_size_limit_counts_utf8_bytes() -> None:
    base = line(ED_BLOB) + " "
    text = base + "\u00e9" * ((MAX_TEXT_BYTES - len(base)) // 2 + 1)
    assert len(text) <= MAX_TEXT_BYTES
    with pytest.raises(InvalidPublicKey, match="16 KiB"):
        parse_public_key(text)


# --- malformed input ---------------------------------------------------------

ED_B64 = base64.b64encode(ED_BLOB).decode()
P256_B64 = base64.b64encode(P256_BLOB).decode()  # 104 bytes, so it ends in "="
P256_KEY = (b"nistp256", P256_POINT)
BAD_Y = (int.from_bytes(P256_POINT[33:], "big") + 1).to_bytes(32, "big")

MALFORMED = {
    "empty": ("", "no public key"),
    "blank lines": (" \n\t\n", "no public key"),
    "comment only": ("# ssh-ed25519 " + ED_B64, "no public key"),
    "one field": ("ssh-ed25519", "no public key"),
    "blob alone": (ED_B64, "no public key"),
    "bad base64 char": ("ssh-ed25519 " + ED_B64[:8] + "*" + ED_B64[9:], "base64"),
    "missing padding": ("ecdsa-sha2-nistp256 " + P256_B64.rstrip("="), "base64"),
    "extra padding": ("ecdsa-sha2-nistp256 " + P256_B64 + "=", "base64"),
    "data after padding": ("ecdsa-sha2-nistp256 " + P256_B64 + "AAAA", "base64"),
    "url-safe alphabet": ("ssh-ed25519 " + ED_B64.replace("A", "-"), "base64"),
    "truncated blob": (line(ED_BLOB[:-1]), "truncated"),
    "trailing bytes": (line(ED_BLOB + b"\x00"), "trailing"),
    "empty blob string": (line(b"\x00\x00\x00\x00"), "unsupported"),
    "unknown algorithm": (line(wire(b"ssh-foo", ED_KEY)), "unsupported"),
    "certificate": (
        line(wire(b"ssh-ed25519-cert-v01@openssh.com", b"nonce", ED_KEY)),
        "certificate",
    ),
    "ecdsa curve mismatch": (
        line(wire(b"ecdsa-sha2-nistp384", *P256_KEY), "ecdsa-sha2-nistp384"),
        "curve name",
    ),
    "ecdsa unknown curve": (
        line(wire(b"ecdsa-sha2-nistp256", b"secp256k1", P256_POINT)),
        "curve name",
    ),
    "ecdsa compressed point": (
        line(wire(b"ecdsa-sha2-nistp256", b"nistp256", b"\x02" + P256_POINT[1:33])),
        "uncompressed",
    ),
    "ecdsa bad prefix byte": (
        line(wire(b"ecdsa-sha2-nistp256", b"nistp256", b"\x05" + P256_POINT[1:])),
        "uncompressed",
    ),
    "ecdsa short point": (
        line(wire(b"ecdsa-sha2-nistp256", b"nistp256", P256_POINT[:-1])),
        "uncompressed",
    ),
    "ecdsa point off curve": (
        line(wire(b"ecdsa-sha2-nistp256", b"nistp256", P256_POINT[:33] + BAD_Y)),
        "not on the curve",
    ),
    "ed25519 of 31 bytes": (line(wire(b"ssh-ed25519", ED_KEY[:31])), "32 bytes"),
    "ed25519 of 33 bytes": (line(wire(b"ssh-ed25519", ED_KEY + b"\x00")), "32 bytes"),
    "sk-ed25519 without application": (
        line(wire(b"sk-ssh-ed25519@openssh.com", ED_KEY)),
        "truncated",
    ),
    "huge outer length prefix": (
        line(struct.pack(">I", 2**31) + b"ssh-ed25519"),
        "truncated",
    ),
    "huge inner length prefix": (
        line(ssh_string(b"ssh-ed25519") + struct.pack(">I", 2**31) + ED_KEY),
        "truncated",
    ),
    "max length prefix": (line(b"\xff\xff\xff\xff"), "truncated"),
    "rsa even exponent": (line(wire(b"ssh-rsa", b"\x01\x00", b"\x00\xc5")), "exponent"),
    "rsa negative exponent": (line(wire(b"ssh-rsa", b"\xff", b"\x00\xc5")), "exponent"),
    "rsa huge exponent": (
        line(wire(b"ssh-rsa", b"\x01\x00\x00\x01", b"\x00\xc5")),
        "exponent",
    ),
    "rsa zero modulus": (line(wire(b"ssh-rsa", b"\x01\x00\x01", b"")), "modulus"),
    "rsa missing modulus": (line(wire(b"ssh-rsa", b"\x01\x00\x01")), "truncated"),
    "dsa of 512 bits": (
        line(wire(b"ssh-dss", b"\x00" + b"\xff" * 64, b"\x03", b"\x02", b"\x05")),
        "1024 bits",
    ),
}


@pytest.mark.parametrize(("text", "reason"), MALFORMED.values(), ids=MALFORMED.keys())
def test_malformed_key_rejected(text: str, reason: str) -> None:
    # ``reason`` says why the Go reader refuses it; asyncssh words its own reasons.
    with pytest.raises(InvalidPublicKey):
        parse_public_key(text)


def test_wire_error_preferred_over_base64_error_with_options() -> None:
    # Read without options, the type word is taken as the blob and fails as
    # base64; the reported reason must still be the real one.
    with pytest.raises(InvalidPublicKey, match="invalid key"):
        parse_public_key("no-pty " + line(ED_BLOB + b"\x00"))


def test_error_is_a_value_error() -> None:
    assert issubclass(InvalidPublicKey, ValueError)


# --- properties --------------------------------------------------------------


def parse_or_reject(text: str) -> ParsedKey | None:
    try:
        return parse_public_key(text)
    except InvalidPublicKey:
        return None


@given(st.text())
def test_arbitrary_text_only_raises_invalid_public_key(text: str) -> None:
    parsed = parse_or_reject(text)
    assert parsed is None or parsed.fingerprint.startswith("SHA256:")


@given(st.binary(max_size=300), st.sampled_from(["ssh-rsa", "x", 'from="a b" k']))
def test_arbitrary_blob_only_raises_invalid_public_key(blob: bytes, prefix: str) -> None:
    parsed = parse_or_reject(f"{prefix} {base64.b64encode(blob).decode()}")
    assert parsed is None or parsed.fingerprint.startswith("SHA256:")


@given(st.sampled_from([ED_BLOB, P256_BLOB]), st.data())
def test_mutated_blob_only_raises_invalid_public_key(blob: bytes, data: st.DataObject) -> None:
    index = data.draw(st.integers(0, len(blob) - 1))
    replacement = data.draw(st.binary(max_size=5))
    mutated = blob[:index] + replacement + blob[index + 1 :]
    parsed = parse_or_reject(line(mutated))
    if parsed is not None:
        assert parsed.blob == mutated
        assert parsed.fingerprint.startswith("SHA256:")
