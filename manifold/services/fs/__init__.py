"""The file tree: reads, writes, the unchecked tree under them, access rules, downloads."""
