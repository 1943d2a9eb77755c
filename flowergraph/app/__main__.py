"""``python -m flowergraph.app write DIR``: a Flower app folder with every installed method's keys
(:mod:`flowergraph.app.generator`)."""

import sys

from .generator import main

sys.exit(main())
