"""`python -m ember` runs the command line."""

from ember.app.cli import main

raise SystemExit(main())
