"""Flower-free privacy primitives (CKKS contexts and key provisioning, packing, byte accounting)."""
