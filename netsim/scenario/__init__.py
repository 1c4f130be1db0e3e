"""What is simulated: flows (traffic patterns) and link faults."""
