"""What a run wrote: the trainer's trace files and torch.profiler (Kineto) traces."""
