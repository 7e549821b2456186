"""The Strm driver: ``.strm`` files for media servers over other paths of the tree."""
