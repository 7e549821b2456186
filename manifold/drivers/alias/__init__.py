"""The Alias driver: several paths of the tree shown as one folder."""
