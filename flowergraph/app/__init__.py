"""The Flower apps and what runs them: the ServerApp (:mod:`~flowergraph.app.server_app`) and its resumable server
loop (:mod:`~flowergraph.app.loop`, with fast reply polling in :mod:`~flowergraph.app.polling`), the ClientApp
(:mod:`~flowergraph.app.client_app`), the in-process federation for tests and long benchmarks
(:mod:`~flowergraph.app.inprocess`), and the processes and app folders the launchers need
(:mod:`~flowergraph.app.runtime`).

A Flower app's ``pyproject.toml`` names the components ``flowergraph.app.server_app:app`` and
``flowergraph.app.client_app:app``."""
