"""`python -m gsrender ...` runs the `gsrender` command (gsrender.cli.main)."""
from gsrender.cli.main import main

raise SystemExit(main())
