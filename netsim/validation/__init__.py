"""Drivers that check the engines: CC reference scenarios against the HPCC ns-3
simulator and closed forms, CC studies, job traffic, and the conservation invariants."""
