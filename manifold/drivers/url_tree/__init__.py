"""The UrlTree driver: a read-only tree of URLs written out in its options."""
