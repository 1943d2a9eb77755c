"""``python -m flowergraph.deployment``."""

import sys

from .cli import main

sys.exit(main())
