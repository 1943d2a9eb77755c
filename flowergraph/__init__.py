"""flowergraph: federated graph learning as Flower Strategies and clients over PyTorch Geometric.

The layers (docs/architecture.md): launchers (:mod:`flowergraph.simulation`, :mod:`flowergraph.deployment`,
:mod:`flowergraph.partition`, :mod:`flowergraph.plot`); the Flower apps (:mod:`flowergraph.app`); the method and
task registry (:mod:`flowergraph.methods`) and the settings (:mod:`flowergraph.settings`); strategies and clients
(:mod:`flowergraph.strategies`, :mod:`flowergraph.clients`) meeting only through the wire modules
(:mod:`flowergraph.wire`); and the Flower-free core (:mod:`flowergraph.tasks`, :mod:`flowergraph.privacy`,
:mod:`flowergraph.storage`, :mod:`flowergraph.data`).
"""


def _version() -> str:
    """The version ``pyproject.toml`` declares (its one place): the installed distribution's, else (a checkout on
    ``PYTHONPATH``, not installed) the checkout's ``pyproject.toml``'s."""
    from importlib import metadata
    from pathlib import Path

    try:
        return metadata.version("flowergraph")
    except metadata.PackageNotFoundError:
        pass
    pyproject = Path(__file__).resolve().parent.parent / "pyproject.toml"
    try:
        import tomllib

        return str(tomllib.loads(pyproject.read_text())["project"]["version"])
    except (OSError, KeyError, ValueError):
        return "0+unknown"


__version__ = _version()
__all__ = ["__version__"]
