"""What we learn from a run: calibration fits, calibrated models, diagnosis."""
