"""Check a recommendation on other traffic: ``netsim simulate`` with and without ``--settings``."""
