"""The Crypt driver: another path of the tree, encrypted as rclone's crypt remote does."""
