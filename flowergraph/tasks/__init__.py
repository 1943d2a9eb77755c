"""Flower-free graph tasks: datasets, splits, partitioners, per-client graphs, models, training loops."""
