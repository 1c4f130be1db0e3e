"""A real 3D-parallel (tensor, pipeline, data) GPT trainer on torch.distributed, instrumented.

It stands alone (imports torch, none of the other packages of the suite) and writes the
``trainer-trace/1`` measurement files that ``netsim.traces.records`` reads. See docs/trainer.md.
Importing this package does not import torch; the submodules do.
"""
