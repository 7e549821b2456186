"""The WebDav driver: a folder of a WebDAV server (RFC 4918), reached over HTTP(S)
with Basic or Digest authentication."""
