"""The suite's own NCCL tuner plugin: where its C source is, how an operator builds it.

``netsim recommend -o DIR`` writes ``DIR/netsim_tuner.c`` (the package file
``tuner/nccl_plugin/netsim_tuner.c``) and points ``NCCL_TUNER_PLUGIN`` at
``DIR/libnccl-tuner-netsim.so``, with the one ``gcc`` line that builds it written above it in
``nccl.env``. The plugin reads ``nccl_tuner.csv`` (the example plugin's format) and acts only
on a collective a row matches: a collective no row matches, and a row whose channels is -1,
keep NCCL's own algorithm, protocol and channel count. NCCL's example plugin
(``plugins/tuner/example/plugin.c``) sets ``*nChannels = 1`` before matching, so every
collective its rows miss ran on one channel; that is why the suite stopped using it.

Tuner API versions exported (NVIDIA/nccl ``src/plugin/tuner.cc`` looks for v6, v5, v4, v3,
v2 in turn; first release with each symbol from the NCCL git tags): ``ncclTunerPlugin_v5``
(NCCL 2.28.3 and later, 2.30 included), ``ncclTunerPlugin_v4`` (2.24.3 to 2.27.x),
``ncclTunerPlugin_v3`` (2.22.3 to 2.23.x). Read at NVIDIA/nccl commit
``5067397c2676d5aed50042fc39e5c8ee96eb0027`` (2.30.7): ``src/include/plugin/tuner/tuner_v{3,4,5}.h``,
``src/enqueue.cc`` (``ncclGetAlgoInfo``: a non-zero ``nChannels`` from the tuner replaces
NCCL's, 0 keeps it), ``src/plugin/plugin_open.cc`` (a name containing ``/`` is opened as
the path it is).
"""

from __future__ import annotations

import shlex
from importlib import resources
from pathlib import Path

#: The C source inside the package and the names written to the output directory.
PACKAGE_SOURCE = "nccl_plugin/netsim_tuner.c"
SOURCE_NAME = "netsim_tuner.c"
LIBRARY_NAME = "libnccl-tuner-netsim.so"
#: Exported symbols, newest first, with the NCCL releases that load each.
SYMBOLS = {"ncclTunerPlugin_v5": "NCCL >= 2.28.3", "ncclTunerPlugin_v4": "NCCL 2.24.3-2.27",
           "ncclTunerPlugin_v3": "NCCL 2.22.3-2.23"}
NCCL_COMMIT = "5067397c2676d5aed50042fc39e5c8ee96eb0027"


def source_text() -> str:
    """The plugin's C source as installed with the package."""
    return resources.files("tuner").joinpath(PACKAGE_SOURCE).read_text()


def build_command(source: Path, library: Path, compiler: str = "gcc") -> list[str]:
    """The compiler call that builds *library* from *source* (no other flags are needed)."""
    return [compiler, "-O2", "-shared", "-fPIC", "-o", str(library), str(source)]


def write_source(outdir: Path, final_dir: Path | None = None) -> tuple[Path, Path, str]:
    """Write ``netsim_tuner.c`` into *outdir*: (source, library to build, build line), the
    last two naming *final_dir* (default *outdir*), where the output set lands."""
    final = Path(final_dir or outdir).resolve()
    (Path(outdir) / SOURCE_NAME).write_text(source_text())
    src, lib = final / SOURCE_NAME, final / LIBRARY_NAME
    return src, lib, shlex.join(build_command(src, lib))
