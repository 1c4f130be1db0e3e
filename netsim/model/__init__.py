"""What a job is made of: model shapes and presets, FLOPs, hardware profiles."""
