"""``python -m duetime`` runs the CLI."""

from duetime.cli.entry import main

raise SystemExit(main())
