"""`python -m gsrender ...` runs the `gsrender` command (gsrender.cli)."""
from gsrender.cli import main

raise SystemExit(main())
