"""The SFTP server: the tree over SSH's file transfer protocol (asyncssh).

``server`` listens and closes; ``gate`` admits a connection (none for the guest,
password, public key); ``session`` maps SFTP requests onto ``GuardedOps``, ``files``
holds the open files, ``statuses`` turns errors into SFTP status codes, ``hostkeys``
keeps the host keys in the data folder.
"""
