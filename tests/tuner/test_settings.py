"""``netsim simulate --settings DIR`` and its reader ``tuner.settings.read_settings``: a
recommendation read back equals what recommend decided, bad files are refused naming the key,
``--cc-param`` takes the firmware names, and the settings change what is simulated."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from inputspec import InputError, to_dict
from netsim.cc.params import FIRMWARE_PARAMS, DcqcnParams, HybridParams
from tuner import render
from tuner.cli import main
from tuner.settings import read_settings

# A recommendation that moves every knob the packet engine takes away from its default.
RP = {"rpg_time_reset": 50, "rpg_byte_reset": 32767, "rpg_ai_rate": 20, "rpg_hai_rate": 200,
      "dce_tcp_g": 1000}
NP = {"cnp_dscp": 48, "cnp_802p_prio": 6, "min_time_between_cnps": 8}
ECN = {"kmin_bytes": 5_000, "kmax_bytes": 50_000, "pmax": 0.5}
PORTS = [{"link_kind": "host", "port_speed_gbps": 100.0, "cable_m": 100.0,
          "headroom_bytes": 46072}]
ENV = {"NCCL_IB_QPS_PER_CONNECTION": "4", "NCCL_IB_TIMEOUT": "18", "NCCL_IB_RETRY_CNT": "7",
       "NCCL_IB_TC": "106"}


def write_dir(d: Path, rp=RP, np_=NP, ecn=ECN, env=ENV) -> Path:
    """A settings directory as `netsim recommend -o` writes it (its three files)."""
    d.mkdir(parents=True, exist_ok=True)
    render.write_nic_conf(d / "nic_dcqcn.conf", rp, np_, 3)
    render.write_switch_qos(d / "switch_qos.yaml", ecn, PORTS)
    render.write_nccl_env(d / "nccl.env", env)
    return d


# ------------------------------------------------------------------------------- round trip


@pytest.fixture(scope="module")
def recommended(tmp_path_factory):
    """A real (small) recommend run and its -o directory."""
    from netsim.workload import JobSpec
    from topologies import load_fabric
    from tuner.recommend import RecommendOptions, recommend, write_outputs

    fabric = load_fabric("fat-tree-k8")
    job = JobSpec(model="gpt3-1.3b", tp=1, pp=2, dp=8, global_batch=32)
    rec = recommend(fabric, job, RecommendOptions(budget=2, workers=0))
    out = tmp_path_factory.mktemp("reco")
    write_outputs(rec, out, fabric)
    return rec, out


def test_round_trip_equals_what_recommend_decided(recommended) -> None:
    rec, out = recommended
    rs = read_settings(out)
    assert dict(rs.nic.rp) == rec.nic_rp and dict(rs.nic.np) == rec.nic_np
    assert to_dict(rs.switch.ecn) == {"priority": 3, **rec.ecn}
    assert [to_dict(p) for p in rs.switch.pfc.ports] == rec.headroom_ports
    assert dict(rs.nccl.env) == rec.env
    assert rs.nccl.qps == int(rec.env["NCCL_IB_QPS_PER_CONNECTION"])
    assert (rs.nccl.ib_timeout, rs.nccl.retry_cnt) == (int(rec.env["NCCL_IB_TIMEOUT"]),
                                                       int(rec.env["NCCL_IB_RETRY_CNT"]))
    # the engine values are the search's own choice (ccsearch.to_engine of the chosen point)
    from tuner.ccsearch import to_engine

    chosen = to_engine(rec.details["cc"]["chosen"])[1]
    assert {k: float(v) for k, v in rs.nic.engine_params().items()} == \
        {k: float(v) for k, v in chosen.items()}


def test_round_trip_of_non_default_values(tmp_path) -> None:
    rs = read_settings(write_dir(tmp_path / "s"))
    assert dict(rs.nic.rp) == RP and dict(rs.nic.np) == NP
    assert to_dict(rs.switch.ecn) == {"priority": 3, **ECN}
    assert dict(rs.nccl.env) == ENV and rs.nccl.qps == 4
    assert rs.nic.engine_params()["rpg_time_reset_us"] == 50


# ------------------------------------------------------------------------------- bad files


BAD = [  # (file, text replaced, replacement, what the error must name)
    ("nic_dcqcn.conf", "rpg_time_reset = 50", "rpg_time_reset = 0", "rpg_time_reset"),
    ("nic_dcqcn.conf", "rpg_time_reset = 50", "rpg_time_reset_us = 50", "rpg_time_reset_us"),
    ("nic_dcqcn.conf", "dce_tcp_g = 1000", "dce_tcp_g = 2000", "dce_tcp_g"),
    ("nic_dcqcn.conf", "rpg_ai_rate = 20", "rpg_ai_rate = fast", "rpg_ai_rate"),
    ("nic_dcqcn.conf", "[roce_np]\nenable_prio = 3", "[roce_np]\nenable_prio = 4", "enable_prio"),
    ("nic_dcqcn.conf", "[roce_np]", "[roce_xx]", "roce_xx"),
    ("switch_qos.yaml", "pmax: 0.5", "pmax: 2", "pmax"),
    ("switch_qos.yaml", "kmax_bytes: 50000", "kmax_bytes: 50", "kmax_bytes"),
    ("switch_qos.yaml", "pmax: 0.5", "pmax: 0.5\n  kmid_bytes: 7", "kmid_bytes"),
    ("switch_qos.yaml", "netsim-switch-qos/1", "netsim-switch-qos/2", "schema"),
    ("switch_qos.yaml", "headroom_bytes: 46072", "headroom_bytes: -1", "headroom_bytes"),
    ("nccl.env", "NCCL_IB_QPS_PER_CONNECTION=4", "NCCL_IB_QPS_PER_CONNECTION=0",
     "NCCL_IB_QPS_PER_CONNECTION"),
    ("nccl.env", "NCCL_IB_TIMEOUT=18", "NCCL_IB_TIMEOUT=40", "NCCL_IB_TIMEOUT"),
    ("nccl.env", "NCCL_IB_TC=106", "NCCL_IB_TC=106\nexport NCCL_FOO=1", "NCCL_FOO"),
]


@pytest.mark.parametrize("name, old, new, needle", BAD)
def test_bad_file_is_one_line_exit_2_naming_the_key(tmp_path, capsys, name, old, new,
                                                    needle) -> None:
    d = write_dir(tmp_path / "s")
    text = (d / name).read_text()
    assert old in text
    (d / name).write_text(text.replace(old, new, 1))
    with pytest.raises(InputError, match=needle):
        read_settings(d)
    argv = ["simulate", "--level", "packet", "--fabric", "fat-tree-k4", "--traffic", "incast:2",
            "--size", "8KB", "--settings", str(d)]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and needle in err and name in err


def test_missing_dir_or_file_exit_2(tmp_path, capsys) -> None:
    argv = ["simulate", "--level", "flow", "--fabric", "fat-tree-k4", "--settings"]
    assert main(argv + [str(tmp_path / "nope")]) == 2
    d = write_dir(tmp_path / "s")
    (d / "nccl.env").unlink()
    assert main(argv + [str(d)]) == 2
    err = capsys.readouterr().err.splitlines()
    assert "not a directory" in err[0] and "nccl.env" in err[1]


# ------------------------------------------------------------------------------- firmware names


def test_firmware_names_map_to_engine_fields() -> None:
    fields = set(DcqcnParams.__dataclass_fields__)
    assert all(f.engine is None or f.engine in fields for f in FIRMWARE_PARAMS)
    # every name recommend writes into nic_dcqcn.conf is in the table
    from tuner.ccreport import NIC_NAMES

    names = {f.firmware for f in FIRMWARE_PARAMS}
    assert {n for _, n in NIC_NAMES.values()} <= names
    p = DcqcnParams.from_dict({"rpg_time_reset": "50", "rpg_ai_rate": 20,
                               "min_time_between_cnps": 8, "rpg_min_dec_fac": 40})
    assert (p.rpg_time_reset_us, p.rpg_ai_rate_mbps, p.min_time_between_cnps_us,
            p.rpg_min_dec_fac_pct) == (50.0, 20.0, 8.0, 40.0)
    # hybrid takes the firmware names of the DCQCN fields it has
    assert HybridParams.from_dict({"dce_tcp_rtt": 2}).dce_tcp_rtt_us == 2.0
    with pytest.raises(ValueError, match="given twice"):
        DcqcnParams.from_dict({"rpg_time_reset": 50, "rpg_time_reset_us": 60})
    with pytest.raises(ValueError, match="rpg_time_reset"):  # hybrid has no timer
        HybridParams.from_dict({"rpg_time_reset": 50})


def _packet_config(argv: list[str]):
    from tuner.cli import build_parser
    from tuner.cli.sim_packet import config_from_args

    return config_from_args(build_parser().parse_args(["simulate", *argv]))


def test_cc_param_accepts_firmware_names() -> None:
    cfg = _packet_config(["--cc-param", "rpg_time_reset=50", "--cc-param", "min_time_between_cnps=8"])
    assert cfg.cc_params == {"rpg_time_reset_us": "50", "min_time_between_cnps_us": "8"}
    assert cfg.cnp_interval_for_cc() == 8_000_000  # 8 us in ps
    assert _packet_config([]).cnp_interval_for_cc() == 4_000_000


def test_cc_param_bad_firmware_name_exit_2(capsys) -> None:
    argv = ["simulate", "--fabric", "fat-tree-k4", "--traffic", "incast:2", "--size", "8KB",
            "--cc-param", "rpg_time_reset=0"]
    assert main(argv) == 2
    assert "rpg_time_reset" in capsys.readouterr().err


# ------------------------------------------------------------------------------- simulate


INCAST = ["simulate", "--level", "packet", "--fabric", "fat-tree-k4", "--traffic", "incast:4",
          "--size", "256KB", "--json"]


def _run(capsys, argv) -> dict:
    assert main(argv) == 0
    return json.loads(capsys.readouterr().out)


def test_packet_settings_change_what_is_simulated(tmp_path, capsys) -> None:
    d = write_dir(tmp_path / "s")
    plain = _run(capsys, INCAST)
    tuned = _run(capsys, INCAST + ["--settings", str(d)])
    assert "settings_applied" not in plain
    applied = {(a["file"], a["key"]): a for a in tuned["settings_applied"]["applied"]}
    assert applied[("nic_dcqcn.conf", "[roce_rp] rpg_time_reset")]["knob"] == \
        "cc_params.rpg_time_reset_us"
    assert applied[("switch_qos.yaml", "ecn.kmin_bytes")]["value"] == 5_000
    assert applied[("nccl.env", "NCCL_IB_QPS_PER_CONNECTION")]["knob"] == "qps"
    not_applied = {a["key"] for a in tuned["settings_applied"]["not_applied"]}
    assert "NCCL_IB_TC" in not_applied and "[roce_np] cnp_dscp" in not_applied
    # the simulated parameters changed: 4 QPs per flow, ECN marks from 5 KB instead of 150 KB
    assert len(tuned["flows"]) == len(plain["flows"])
    assert tuned["ecn_marks"] > plain["ecn_marks"]
    assert (tuned["ecn_marks"], tuned["cnps"]) != (plain["ecn_marks"], plain["cnps"])


def test_packet_settings_reach_the_config(tmp_path) -> None:
    d = str(write_dir(tmp_path / "s"))
    from tuner.cli import build_parser
    from tuner.cli._settings import plan_for
    from tuner.cli.sim_packet import cc_params_from_args, config_from_args

    def config(argv):
        args = build_parser().parse_args(["simulate", *argv])
        plan = plan_for(args, "packet", set(cc_params_from_args(args)))
        return args, config_from_args(args, plan.knobs if plan else None)

    args0, base = config([])
    args1, cfg = config(["--settings", d])
    assert (base.ecn_kmin_bytes, base.ecn_kmax_bytes, base.ecn_pmax) == (150_000, 1_500_000, 0.2)
    assert (cfg.ecn_kmin_bytes, cfg.ecn_kmax_bytes, cfg.ecn_pmax) == (5_000, 50_000, 0.5)
    assert (base.ib_timeout, cfg.ib_timeout) == (20, 18) and args1.qps == 4 and args0.qps is None
    assert cfg.cc_params["rpg_time_reset_us"] == 50 and base.cc_params == {}
    assert cfg.cnp_interval_for_cc() == 8_000_000
    # a flag given explicitly wins over the file
    args2, cfg2 = config(["--settings", d, "--ecn-kmin", "20KB", "--qps", "2",
                          "--cc-param", "rpg_time_reset=100"])
    assert cfg2.ecn_kmin_bytes == 20_000 and args2.qps == 2
    assert cfg2.cc_params["rpg_time_reset_us"] == "100"
    # swift has no DCQCN parameters: none applied, the ECN ramp still is
    _, cfg3 = config(["--settings", d, "--cc", "swift"])
    assert cfg3.cc_params == {} and cfg3.ecn_kmin_bytes == 5_000


def test_flow_level_applies_qps_and_says_what_it_ignores(tmp_path, capsys) -> None:
    d = write_dir(tmp_path / "s")
    argv = ["simulate", "--level", "flow", "--fabric", "fat-tree-k4", "--collective",
            "allreduce", "--size", "16MB", "--json"]
    plain, tuned = _run(capsys, argv), _run(capsys, argv + ["--settings", str(d)])
    assert (plain["qps_per_connection"], tuned["qps_per_connection"]) == (1, 4)
    assert [a["key"] for a in tuned["settings_applied"]["applied"]] == \
        ["NCCL_IB_QPS_PER_CONNECTION"]
    why = {a["key"]: a["why"] for a in tuned["settings_applied"]["not_applied"]}
    assert "ecn.kmin_bytes" in why and "[roce_rp] rpg_time_reset" in why
    assert "retransmit" in why["NCCL_IB_TIMEOUT"]


def test_doc_table_is_rendered_from_the_csv() -> None:
    from experiments.settings_check.run import read_csv, render_table

    root = Path(__file__).resolve().parents[2]
    rows = read_csv(root / "experiments" / "settings_check" / "results" / "compare.csv")
    assert len(rows) == 18 and {r["settings"] for r in rows} == {
        "defaults", "recommended", "recommended, --qps 1"}
    doc = (root / "docs" / "recommend.md").read_text()
    section = doc.split("## Check a recommendation on your own traffic")[1].split("\n## ")[0]
    assert render_table(rows) in section
