"""Predicted vs published training throughput of large GPT runs (see README.md)."""
