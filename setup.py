"""Optional compiled build of the packet engine's hot path (metadata lives in setup.cfg).

``netsim/packet/engine.py`` and ``qp.py`` are compiled with Cython (pure-Python mode: the same
files, typed by annotations and ``.pxd`` declarations), with the C event heap
``netsim/packet/_cheap.pyx``, when Cython and a C compiler are available. The build is
optional: if Cython is missing or a compile fails, the package installs as plain Python and
runs the same code (``netsim/packet/build_mode.py`` picks what loads). ``NETSIM_PURE_PYTHON=1``
at build time skips the compile.
"""

import os
import sys

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

HOT = ["netsim/packet/_cheap.pyx", "netsim/packet/qp.py", "netsim/packet/engine.py"]


class OptionalBuildExt(build_ext):
    """build_ext that never fails the install: an extension that does not build is left out."""

    def run(self):
        try:
            super().run()
        except Exception as exc:  # noqa: BLE001 (any compiler trouble: plain Python instead)
            print(f"netsim: compiled hot path not built ({exc}); plain Python engine",
                  file=sys.stderr)

    def build_extension(self, ext):
        try:
            super().build_extension(ext)
        except Exception as exc:  # noqa: BLE001
            print(f"netsim: {ext.name} not built ({exc}); plain Python engine", file=sys.stderr)


def hot_extensions():
    if os.environ.get("NETSIM_PURE_PYTHON", "").strip().lower() not in ("", "0", "false", "no"):
        return []
    try:
        from Cython.Build import cythonize
    except ImportError:
        print("netsim: Cython not available; plain Python engine", file=sys.stderr)
        return []
    exts = [Extension(p.rsplit(".", 1)[0].replace("/", "."), [p]) for p in HOT]
    try:
        exts = cythonize(exts, language_level=3, build_dir="build/cython", quiet=True,
                         compiler_directives={"binding": False})
    except Exception as exc:  # noqa: BLE001 (a Cython that cannot translate them)
        print(f"netsim: Cython translation failed ({exc}); plain Python engine", file=sys.stderr)
        return []
    for ext in exts:
        ext.optional = True
    return exts


setup(ext_modules=hot_extensions(), cmdclass={"build_ext": OptionalBuildExt})
