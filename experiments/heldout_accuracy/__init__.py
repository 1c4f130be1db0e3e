"""Held-out accuracy of the workload model on the CPU trainer (see README.md)."""
