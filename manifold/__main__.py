"""``python -m manifold``: the same command line as ``manifold``."""

from manifold.cli import main

raise SystemExit(main())
