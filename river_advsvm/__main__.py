"""`python -m river_advsvm` is the `advsvm` command."""

import sys

from river_advsvm.cli import main

sys.exit(main())
