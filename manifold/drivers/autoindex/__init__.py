"""The AutoIndex driver: a web server's directory listing pages, mounted read-only."""
