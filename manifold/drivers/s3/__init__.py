"""The S3 driver: a bucket (or a folder of one) of any S3-compatible object store.

Nothing is imported here, so the registry can read ``meta`` without ``driver``.
"""
