"""``python -m flowergraph.settings``: print or rewrite the configuration reference (see
:mod:`flowergraph.settings.reference`)."""

from .reference import main

main()
