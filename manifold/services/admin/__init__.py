"""What admins run: settings, metas, storages."""
