"""The SMB driver: a folder of a Windows or Samba file share, over SMB 2/3.

Nothing is imported here, so the registry can read ``meta`` without ``driver``.
"""
