"""Reproducible studies. ``__path__`` extends over every ``experiments/`` folder on
``sys.path`` (``pkgutil.extend_path``), so a study laid out by ``netsim sweep --init-study NAME
--dir SOMEWHERE/experiments`` imports as ``experiments.NAME`` with SOMEWHERE on the path."""

from pkgutil import extend_path

__path__ = extend_path(__path__, __name__)
