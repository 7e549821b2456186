"""Signature checks against AWS's own published example of a chunked, signed upload
(``PUT /examplebucket/chunkObject.txt``, 66,560 bytes of ``a`` in 64 KiB chunks)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta

import pytest

from manifold.protocols.s3 import sigv4
from manifold.protocols.s3.buckets import Bucket
from manifold.protocols.s3.errors import S3Error

KEYS = sigv4.Keys("AKIAIOSFODNN7EXAMPLE", "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY")
SIGNED = "content-encoding;content-length;host;x-amz-content-sha256;x-amz-date;" + (
    "x-amz-decoded-content-length;x-amz-storage-class"
)
HEADERS = {
    "host": "s3.amazonaws.com",
    "x-amz-date": "20130524T000000Z",
    "x-amz-storage-class": "REDUCED_REDUNDANCY",
    "authorization": (
        "AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/20130524/us-east-1/s3/aws4_request,"
        f"SignedHeaders={SIGNED},"
        "Signature=4f232c4386841ef735655705268965c44a0e4690baa4adea153f7db9fa80a0a9"
    ),
    "x-amz-content-sha256": sigv4.STREAMING,
    "content-encoding": "aws-chunked",
    "x-amz-decoded-content-length": "66560",
    "content-length": "66824",
}
PATH = "/examplebucket/chunkObject.txt"
WHEN = datetime(2013, 5, 24, 0, 5, tzinfo=UTC)
CHUNK_SIGNATURES = (
    "ad80c730a21e5b8d04586a2213dd63b9a0e99e0e2307b0ade35a65485a288648",
    "0055627c9e194cb4542bae2aa5492e3c1575bbb81b612b7d234b86a503ef5497",
    "b6c6ea8a5354eaf15b3cb7646744f4275b71ea724fed81ceb9323e279d449df9",
)


def chunked(first: bytes = b"a" * 65536) -> bytes:
    sig1, sig2, sig3 = CHUNK_SIGNATURES
    return (
        f"10000;chunk-signature={sig1}\r\n".encode()
        + first
        + f"\r\n400;chunk-signature={sig2}\r\n".encode()
        + b"a" * 1024
        + f"\r\n0;chunk-signature={sig3}\r\n\r\n".encode()
    )


async def pieces(body: bytes, size: int = 1000) -> AsyncIterator[bytes]:
    for start in range(0, len(body), size):
        yield body[start : start + size]


async def decoded(signed: sigv4.Signed, body: bytes) -> bytes:
    return b"".join([data async for data in sigv4.payload(pieces(body), signed)])


async def test_the_published_chunked_upload_verifies_and_decodes() -> None:
    signed = sigv4.verify("PUT", PATH, "", HEADERS, KEYS, WHEN)
    body = chunked()
    assert len(body) == int(HEADERS["content-length"])
    assert await decoded(signed, body) == b"a" * 66560


async def test_a_changed_chunk_fails_its_signature() -> None:
    signed = sigv4.verify("PUT", PATH, "", HEADERS, KEYS, WHEN)
    with pytest.raises(S3Error) as caught:
        await decoded(signed, chunked(b"a" * 65535 + b"b"))
    assert caught.value.code == "SignatureDoesNotMatch"


async def test_a_body_cut_short_is_incomplete() -> None:
    signed = sigv4.verify("PUT", PATH, "", HEADERS, KEYS, WHEN)
    with pytest.raises(S3Error) as caught:
        await decoded(signed, chunked()[:66000])
    assert caught.value.code == "IncompleteBody"


@pytest.mark.parametrize(
    ("change", "code"),
    [
        ({"x-amz-storage-class": "STANDARD"}, "SignatureDoesNotMatch"),
        ({"host": "elsewhere.example"}, "SignatureDoesNotMatch"),
        (
            {"authorization": HEADERS["authorization"].replace("AKIAIOSFODNN7", "AKIAOTHER")},
            "InvalidAccessKeyId",
        ),
        ({"authorization": "AWS AKIAIOSFODNN7EXAMPLE:c2lnbmF0dXJl"}, "InvalidRequest"),
    ],
)
def test_what_the_signature_covers(change: dict[str, str], code: str) -> None:
    with pytest.raises(S3Error) as caught:
        sigv4.verify("PUT", PATH, "", HEADERS | change, KEYS, WHEN)
    assert caught.value.code == code


def test_a_request_from_too_far_in_the_past_or_future() -> None:
    signed_at = datetime(2013, 5, 24, tzinfo=UTC)
    for skew in (timedelta(minutes=16), timedelta(minutes=-16)):
        with pytest.raises(S3Error) as caught:
            sigv4.verify("PUT", PATH, "", HEADERS, KEYS, signed_at + skew)
        assert caught.value.code == "RequestTimeTooSkewed"


def test_no_keys_lets_every_request_in() -> None:
    signed = sigv4.verify("PUT", PATH, "", {}, sigv4.Keys("", ""), WHEN)
    assert signed.key is None


@pytest.mark.parametrize(
    "key",
    ["../x", "a/../../x", "..", "a/..\\..\\x", "a\\..\\..\\x", "\x00", "a/\x00/b", "../other/f"],
)
def test_no_key_leaves_its_bucket(key: str) -> None:
    with pytest.raises(S3Error) as caught:
        Bucket("files", "/local/data").path_of(key)
    assert caught.value.code == "AccessDenied"


@pytest.mark.parametrize(
    ("key", "path"),
    [
        ("/leading", "/leading"),
        ("//double//slash", "/double/slash"),
        ("%2e%2e/literal", "/%2e%2e/literal"),
        ("dots.../x", "/dots.../x"),
    ],
)
def test_keys_are_paths_in_the_buckets_root(key: str, path: str) -> None:
    """The bucket's folder is the root its requests are held in (``Caller.rooted``)."""
    assert Bucket("files", "/local/data").path_of(key) == path
