"""The Azure Blob Storage driver: a container (or a folder of one) of an Azure storage
account, or of any service that speaks its blob API (Azurite, Azure Stack).

Nothing is imported here, so the registry can read ``meta`` without ``driver``.
"""
