"""flowergraph on Flower's Message API: an example app."""
