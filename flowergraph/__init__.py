"""flowergraph: federated graph learning as Flower Strategies + NumPyClients over PyTorch Geometric.

The layers (docs/architecture.md): launchers (:mod:`flowergraph.simulation`, :mod:`flowergraph.deployment`,
:mod:`flowergraph.partition`, :mod:`flowergraph.plot`); the Flower apps (:mod:`flowergraph.app`); the method and
task registry (:mod:`flowergraph.methods`) and the settings (:mod:`flowergraph.settings`); strategies and clients
(:mod:`flowergraph.strategies`, :mod:`flowergraph.clients`) meeting only through the wire modules
(:mod:`flowergraph.wire`); and the Flower-free core (:mod:`flowergraph.tasks`, :mod:`flowergraph.privacy`,
:mod:`flowergraph.storage`, :mod:`flowergraph.data`).
"""

__version__ = "0.3.0"
__all__ = ["__version__"]
