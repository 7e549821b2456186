"""The SFTP driver: a folder of an SSH server, reached through asyncssh.

``meta`` describes it without importing the library; ``driver`` serves it over one
SSH connection per storage (``session``), reopened by itself when it breaks.
"""
