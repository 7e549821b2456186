"""The FTP driver (AList's "FTP"): aioftp for the control channel, a pool of logged-in
connections per storage, range readers for downloads, and optional explicit TLS."""
