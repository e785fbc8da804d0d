"""``python -m geostat``: the command-line interface (:mod:`geostat.cli`)."""

import sys

from geostat.cli import main

sys.exit(main())
