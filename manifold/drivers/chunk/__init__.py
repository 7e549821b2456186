"""The Chunk driver: big files kept as numbered parts on another storage's path."""
