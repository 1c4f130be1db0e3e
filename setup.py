"""Optional compiled build of the packet engine's hot path (metadata lives in setup.cfg).

``netsim/packet/engine.py`` and ``qp.py`` are compiled with Cython (pure-Python mode: the same
files, typed by annotations) when Cython and a C compiler are available. The extensions are
optional: if Cython is missing or the compile fails, the package installs as plain Python and
runs the same code (``netsim/packet/build_mode.py``). ``NETSIM_PURE_PYTHON=1`` at build time
skips the compile.
"""

import os

from setuptools import Extension, setup

HOT = ["netsim/packet/_cheap.pyx", "netsim/packet/qp.py", "netsim/packet/engine.py"]


def hot_extensions():
    if os.environ.get("NETSIM_PURE_PYTHON", "").strip().lower() not in ("", "0", "false", "no"):
        return []
    try:
        from Cython.Build import cythonize
    except ImportError:
        print("netsim: Cython not available, installing the plain Python engine")
        return []
    exts = [Extension(p.rsplit(".", 1)[0].replace("/", "."), [p], optional=True) for p in HOT]
    try:
        return cythonize(exts, language_level=3, build_dir="build/cython", quiet=True,
                         compiler_directives={"binding": False})
    except Exception as exc:  # a Cython that cannot translate them: plain Python
        print(f"netsim: Cython translation failed ({exc}); installing the plain Python engine")
        return []


setup(ext_modules=hot_extensions())
