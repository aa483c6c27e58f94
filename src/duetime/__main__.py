"""``python -m duetime`` runs the CLI."""

from duetime.cli.main import main

raise SystemExit(main())
