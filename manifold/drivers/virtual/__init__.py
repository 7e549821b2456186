"""The Virtual driver: a made-up tree of folders and files, for tests and benchmarks."""
