"""The suite's NCCL tuner plugin (tuner/nccl_plugin/netsim_tuner.c, issue #26 item 4).

The plugin is compiled with gcc into a shared library and called through ctypes with the
struct layout of NCCL's tuner interface v5 (and v4, v3): NVIDIA/nccl 5067397c,
src/include/plugin/tuner/tuner_v{3,4,5}.h. NCCL passes ``*nChannels = 0`` and keeps its own
channel count for 0 (src/enqueue.cc, ncclGetAlgoInfo), so "keeps NCCL's channel count" means
the plugin leaves 0 in place. Skipped cleanly where no C compiler is installed.
"""

from __future__ import annotations

import ctypes
import os
import shlex
import shutil
import subprocess
from pathlib import Path

import pytest

from tuner import tunerplugin
from tuner.recommend import Recommendation, write_outputs
from tuner.render import TUNER_COLLECTIVES, TunerRow, parse_env_file, write_tuner_csv

CC = shutil.which("gcc") or shutil.which("cc")
needs_cc = pytest.mark.skipif(CC is None, reason="no C compiler to build the tuner plugin")

ALGOS = ("tree", "ring", "collnet_direct", "collnet_chain", "nvls", "nvls_tree", "pat")
PROTOS = ("ll", "ll128", "simple")
N_ALGO, N_PROTO = len(ALGOS), len(PROTOS)
IGNORE = -1.0   # NCCL_ALGO_PROTO_IGNORE

Logger = ctypes.c_void_p   # NULL: the plugin must not need NCCL's logger
GetCollInfo = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_int, ctypes.c_size_t,
                               ctypes.c_int, ctypes.c_void_p, ctypes.c_int, ctypes.c_int,
                               ctypes.c_int, ctypes.POINTER(ctypes.c_int))
GetCollInfoV3 = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_int, ctypes.c_size_t,
                                 ctypes.c_int, ctypes.c_void_p, ctypes.c_int, ctypes.c_int,
                                 ctypes.POINTER(ctypes.c_int))
Finalize = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p)
InitV4 = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_size_t, ctypes.c_size_t, Logger,
                          ctypes.POINTER(ctypes.c_void_p))


class TunerV5(ctypes.Structure):
    """ncclTuner_v5_t: name, init(ctx**, commId, nRanks, nNodes, logger, nvlDomainInfo*,
    constants*), getCollInfo(ctx, collType, nBytes, numPipeOps, float** cost, numAlgo,
    numProto, regBuff, int* nChannels), finalize(ctx)."""

    _fields_ = [("name", ctypes.c_char_p),
                ("init", ctypes.CFUNCTYPE(ctypes.c_int, ctypes.POINTER(ctypes.c_void_p),
                                          ctypes.c_uint64, ctypes.c_size_t, ctypes.c_size_t,
                                          Logger, ctypes.c_void_p, ctypes.c_void_p)),
                ("getCollInfo", GetCollInfo), ("finalize", Finalize)]


class TunerV4(ctypes.Structure):
    _fields_ = [("name", ctypes.c_char_p), ("init", InitV4), ("getCollInfo", GetCollInfo),
                ("destroy", Finalize)]


class TunerV3(ctypes.Structure):
    _fields_ = [("name", ctypes.c_char_p), ("init", InitV4), ("getCollInfo", GetCollInfoV3),
                ("destroy", Finalize)]


def _build(tmp: Path) -> Path:
    src, lib, _ = tunerplugin.write_source(tmp)
    subprocess.run(tunerplugin.build_command(src, lib, CC) + ["-Wall", "-Wextra", "-Werror"],
                   check=True)
    return lib


@pytest.fixture(scope="module")
def lib(tmp_path_factory):
    if CC is None:
        pytest.skip("no C compiler")
    return ctypes.CDLL(str(_build(tmp_path_factory.mktemp("plugin"))))


class Comm:
    """One communicator's tuner context, opened through the v5 entry points."""

    def __init__(self, lib, csv: Path, n_ranks: int, n_nodes: int):
        self.api = TunerV5.in_dll(lib, "ncclTunerPlugin_v5")
        os.environ["NCCL_TUNER_CONFIG_FILE"] = str(csv)
        self.ctx = ctypes.c_void_p()
        assert self.api.init(ctypes.byref(self.ctx), 7, n_ranks, n_nodes, None, None, None) == 0

    def ask(self, coll: str, n_bytes: int, ignore=()):
        """(cost table after the call, nChannels after the call), NCCL's inputs: every entry
        cost 1.0 except those in *ignore*, nChannels 0."""
        table = (ctypes.c_float * (N_ALGO * N_PROTO))(*([1.0] * (N_ALGO * N_PROTO)))
        for a, p in ignore:
            table[ALGOS.index(a) * N_PROTO + PROTOS.index(p)] = IGNORE
        channels = ctypes.c_int(0)
        rc = self.api.getCollInfo(self.ctx, TUNER_COLLECTIVES.index(coll), n_bytes, 1,
                                  ctypes.cast(table, ctypes.c_void_p), N_ALGO, N_PROTO, 0,
                                  ctypes.byref(channels))
        assert rc == 0
        return list(table), channels.value

    def close(self):
        assert self.api.finalize(self.ctx) == 0


def _cost(table, algo, proto):
    return table[ALGOS.index(algo) * N_PROTO + PROTOS.index(proto)]


ROWS = [TunerRow("allreduce", 0, 65535, "tree", "ll", -1, 2, 16),
        TunerRow("allreduce", 65536, 1 << 30, "ring", "simple", 24, 2, 16),
        TunerRow("allgather", 0, 1 << 30, "ring", "ll128", -1, -1, -1)]


@pytest.fixture
def rows_csv(tmp_path) -> Path:
    """``ROWS`` written as the tuner CSV ``tmp_path/t.csv``."""
    csv = tmp_path / "t.csv"
    write_tuner_csv(csv, ROWS)
    return csv


@needs_cc
def test_matched_row_sets_its_preference_and_channels(lib, rows_csv):
    comm = Comm(lib, rows_csv, n_ranks=16, n_nodes=2)
    table, ch = comm.ask("allreduce", 1 << 20)
    assert _cost(table, "ring", "simple") == 0.0 and ch == 24
    assert sum(1 for c in table if c == 0.0) == 1    # nothing else touched
    comm.close()


@needs_cc
def test_unmatched_collective_keeps_nccls_channels(lib, rows_csv):
    comm = Comm(lib, rows_csv, n_ranks=16, n_nodes=2)
    for coll in ("reducescatter", "broadcast", "reduce"):   # no row names them
        table, ch = comm.ask(coll, 1 << 20)
        assert ch == 0 and table == [1.0] * (N_ALGO * N_PROTO), coll
    comm.close()
    other = Comm(lib, rows_csv, n_ranks=8, n_nodes=1)        # another communicator shape
    table, ch = other.ask("allreduce", 1 << 20)
    assert ch == 0 and table == [1.0] * (N_ALGO * N_PROTO)
    other.close()


@needs_cc
def test_channels_minus_one_keeps_nccls_channels(lib, rows_csv):
    comm = Comm(lib, rows_csv, n_ranks=16, n_nodes=2)
    table, ch = comm.ask("allreduce", 1024)
    assert _cost(table, "tree", "ll") == 0.0 and ch == 0
    table, ch = comm.ask("allgather", 1 << 20)               # a wildcard row, channels -1
    assert _cost(table, "ring", "ll128") == 0.0 and ch == 0
    comm.close()


@needs_cc
def test_unavailable_choice_and_missing_file_touch_nothing(lib, rows_csv, tmp_path):
    comm = Comm(lib, rows_csv, n_ranks=16, n_nodes=2)
    table, ch = comm.ask("allreduce", 1 << 20, ignore=[("ring", "simple")])
    assert ch == 0 and _cost(table, "ring", "simple") == IGNORE
    assert all(c in (1.0, IGNORE) for c in table)
    comm.close()
    bad = tmp_path / "bad.csv"
    bad.write_text("allreduce,0,10,warp,ll,4,-1,-1\nnot,a,row\n")
    for path in (tmp_path / "absent.csv", bad):
        comm = Comm(lib, path, n_ranks=16, n_nodes=2)
        table, ch = comm.ask("allreduce", 5)
        assert ch == 0 and table == [1.0] * (N_ALGO * N_PROTO)
        comm.close()


@needs_cc
def test_v4_and_v3_entry_points(lib, rows_csv):
    os.environ["NCCL_TUNER_CONFIG_FILE"] = str(rows_csv)
    for sym, cls in (("ncclTunerPlugin_v4", TunerV4), ("ncclTunerPlugin_v3", TunerV3)):
        api = cls.in_dll(lib, sym)
        assert api.name == b"netsim"
        ctx = ctypes.c_void_p()
        assert api.init(16, 2, None, ctypes.byref(ctx)) == 0
        for coll, size, expect in (("allreduce", 1 << 20, 24), ("reducescatter", 1 << 20, 0)):
            table = (ctypes.c_float * (N_ALGO * N_PROTO))(*([1.0] * (N_ALGO * N_PROTO)))
            ch = ctypes.c_int(0)
            args = [ctx, TUNER_COLLECTIVES.index(coll), size, 1,
                    ctypes.cast(table, ctypes.c_void_p), N_ALGO, N_PROTO]
            args += [0, ctypes.byref(ch)] if sym.endswith("v4") else [ctypes.byref(ch)]
            assert api.getCollInfo(*args) == 0
            assert ch.value == expect, (sym, coll)
        assert api.destroy(ctx) == 0


# -- the files `recommend` writes ------------------------------------------------------------


@pytest.fixture(scope="module")
def written(tmp_path_factory):
    out = tmp_path_factory.mktemp("rec")
    rows = [TunerRow("allreduce", 0, 131071, "ring", "ll", -1, 16, 16),
            TunerRow("allreduce", 131072, 1 << 40, "ring", "simple", -1, 16, 16)]
    rec = Recommendation(fabric="f", job={"model": "tiny"}, settings=[], env={},
                         env_reasons={}, tuner_rows=rows, nic_rp={}, nic_np={}, ecn={},
                         headroom_ports=[], ranks=[], iteration_default_s=1.0,
                         iteration_recommended_s=1.0)
    write_outputs(rec, out)
    return out


def test_nccl_env_points_at_the_suites_plugin(written):
    """Fails on the old output: NCCL_TUNER_PLUGIN=example loaded NVIDIA's example plugin,
    which sets *nChannels = 1 for every collective its rows miss."""
    text = (written / "nccl.env").read_text()
    env = parse_env_file(text)
    plugin = Path(env["NCCL_TUNER_PLUGIN"])
    assert env["NCCL_TUNER_PLUGIN"] != "example"
    assert plugin.is_absolute() and plugin.name == tunerplugin.LIBRARY_NAME
    assert plugin.parent == written.resolve()
    assert (written / tunerplugin.SOURCE_NAME).read_text() == tunerplugin.source_text()
    builds = [ln.split("Build it once: ", 1)[1] for ln in text.splitlines()
              if "Build it once: " in ln]
    assert len(builds) == 1 and shlex.split(builds[0])[-1] == str(written.resolve() /
                                                                    tunerplugin.SOURCE_NAME)


@needs_cc
def test_the_build_line_of_nccl_env_builds_a_plugin_that_covers_every_collective(written):
    text = (written / "nccl.env").read_text()
    line = next(ln.split("Build it once: ", 1)[1] for ln in text.splitlines()
                if "Build it once: " in ln)
    argv = shlex.split(line)
    argv[0] = CC
    subprocess.run(argv, check=True)
    env = parse_env_file(text)
    lib = ctypes.CDLL(env["NCCL_TUNER_PLUGIN"])
    csv = Path(env["NCCL_TUNER_CONFIG_FILE"])
    for n_ranks, n_nodes in ((16, 16), (8, 1), (128, 16)):
        comm = Comm(lib, csv, n_ranks, n_nodes)
        for coll in TUNER_COLLECTIVES:
            for size in (4, 1 << 16, 1 << 20, 1 << 30):
                table, ch = comm.ask(coll, size)
                assert ch == 0, (n_ranks, coll, size)          # NCCL's channel count, always
                touched = sum(1 for c in table if c == 0.0)
                assert touched == (1 if (coll, n_ranks) == ("allreduce", 16) else 0)
        comm.close()
