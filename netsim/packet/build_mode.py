"""Which build of the packet engine's hot path runs: compiled (Cython) or plain Python.

``engine.py`` and ``qp.py`` are plain Python with Cython type annotations (pure-Python mode).
``pip install`` compiles them when it can (``setup.py``: an optional extension, so a failed
compile still installs the package); Python's import system then prefers the compiled modules
next to the sources. Both builds run the same code and give bit-identical results
(``tests/netsim/packet/test_compiled_path.py`` compares the result digests of
``netsim/packet/digest.py``); the compiled one is faster.

``NETSIM_PURE_PYTHON=1`` forces the plain path: the sources are loaded in place of the compiled
modules. It must be set before ``netsim.packet`` is first imported (this module runs from
``netsim/packet/__init__.py``, ahead of the engine).
"""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path

#: The modules compiled by ``setup.py`` (in import order: ``engine`` imports ``qp``).
HOT_MODULES = ("qp", "engine")
PURE_ENV = "NETSIM_PURE_PYTHON"


def pure_requested() -> bool:
    """True when the environment asks for the plain Python path."""
    return os.environ.get(PURE_ENV, "").strip().lower() not in ("", "0", "false", "no")


def _load_sources() -> None:
    """Import the hot modules from their ``.py`` files even where compiled ones exist."""
    here = Path(__file__).resolve().parent
    for name in HOT_MODULES:
        full = f"{__package__}.{name}"
        if full in sys.modules:
            continue
        spec = importlib.util.spec_from_file_location(full, here / f"{name}.py")
        module = importlib.util.module_from_spec(spec)
        sys.modules[full] = module
        spec.loader.exec_module(module)
        setattr(sys.modules[__package__], name, module)


def engine_build() -> str:
    """``"compiled"`` if every hot module is the compiled one, ``"python"`` if none is,
    ``"mixed"`` otherwise (a partial build)."""
    flags = {bool(sys.modules[f"{__package__}.{name}"].COMPILED) for name in ("engine", "qp")}
    if flags == {True}:
        return "compiled"
    return "python" if flags == {False} else "mixed"


#: Why the plain path runs although compiled modules exist (a partial or stale build), or None.
FALLBACK_REASON: str | None = None


def _import_hot() -> None:
    """Import the hot modules; if a compiled one cannot load, use the sources for all."""
    global FALLBACK_REASON
    try:
        for name in HOT_MODULES:
            importlib.import_module(f"{__package__}.{name}")
    except ImportError as exc:
        FALLBACK_REASON = f"compiled hot path unusable ({exc}); running the plain Python path"
        for name in HOT_MODULES:
            sys.modules.pop(f"{__package__}.{name}", None)
        _load_sources()


if pure_requested():
    _load_sources()
else:
    _import_hot()
