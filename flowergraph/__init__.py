"""flowergraph: federated graph learning as Flower Strategies + NumPyClients over PyTorch Geometric."""

__version__ = "0.1.0"
