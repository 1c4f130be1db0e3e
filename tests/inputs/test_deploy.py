"""Deployable files of `netsim recommend` (issue #19), each checked by a parser of its format:
bash -n and shellcheck for nic_setup.sh (and its --dry-run output), JSON plus the SONiC
config_db table/key schema for sonic_config_db_<role>.json, a grammar derived from NVIDIA's
NVUE reference for switch_nvue_<role>.txt, and bash itself for nccl.env."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from tuner.deploy import port_classes
from tuner.qos import CNP_DSCP, CNP_PRIO, ROCE_DSCP, ROCE_PRIO
from tuner.recommend import Recommendation, write_outputs
from tuner.render import TunerRow, headroom_bytes

RP = {"rpg_time_reset": 7, "rpg_byte_reset": 344844, "rpg_ai_rate": 8, "rpg_hai_rate": 444,
      "dce_tcp_g": 975}
NP = {"cnp_dscp": CNP_DSCP, "cnp_802p_prio": CNP_PRIO, "min_time_between_cnps": 1}
ECN = {"kmin_bytes": 21243, "kmax_bytes": 324344, "pmax": 0.0848}


@pytest.fixture(scope="module")
def written(tmp_path_factory):
    from topologies import load_fabric

    fabric = load_fabric("fat-tree-k8")
    out = tmp_path_factory.mktemp("rec")
    rec = Recommendation(
        fabric=fabric.name, job={"model": "tiny"}, settings=[],
        env={"NCCL_IB_QPS_PER_CONNECTION": "4", "NCCL_TUNER_CONFIG_FILE": "nccl_tuner.csv"},
        env_reasons={}, tuner_rows=[TunerRow("allreduce", 0, 65536, "ring", "ll")],
        nic_rp=RP, nic_np=NP, ecn=ECN, headroom_ports=[],
        ranks=[{"rank": 0, "host": fabric.servers[0], "local_rank": 0, "gpu": fabric.gpus[0]}],
        iteration_default_s=1.0, iteration_recommended_s=0.9)
    paths = write_outputs(rec, out, fabric)
    return fabric, out, {p.name: p for p in paths}


def test_files_kept_and_added(written):
    _, out, paths = written
    for name in ("nccl.env", "nccl_tuner.csv", "nic_dcqcn.conf", "switch_qos.yaml",
                 "placement.json", "report.md", "nic_setup.sh", "switch_nvue_tor.txt",
                 "switch_nvue_agg.txt", "switch_nvue_core.txt", "sonic_config_db_tor.json",
                 "sonic_config_db_agg.json", "sonic_config_db_core.json", "netsim_tuner.c"):
        assert name in paths and (out / name).is_file(), name


# -- nic_setup.sh ---------------------------------------------------------------------------


def test_nic_script_parses(written):
    _, out, _ = written
    script = out / "nic_setup.sh"
    assert os.access(script, os.X_OK)
    subprocess.run(["bash", "-n", str(script)], check=True)


@pytest.mark.skipif(shutil.which("shellcheck") is None, reason="shellcheck not installed")
def test_nic_script_shellcheck_clean(written):
    _, out, _ = written
    proc = subprocess.run(["shellcheck", "-s", "bash", str(out / "nic_setup.sh")],
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout


def _dry(out: Path, *args: str, env: dict | None = None) -> list[str]:
    proc = subprocess.run(["bash", str(out / "nic_setup.sh"), *args], capture_output=True,
                          text=True, env={**os.environ, **(env or {})})
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.splitlines()


def test_nic_script_dry_run_commands(written):
    fabric, out, _ = written
    lines = _dry(out, "--dry-run", "mlx5_7")
    ifc = "mlx5_7_netdev"  # no such device here: the dry run names it
    assert f"+ mlnx_qos -i {ifc} --trust dscp" in lines
    assert f"+ mlnx_qos -i {ifc} --pfc 0,0,0,1,0,0,0,0" in lines
    for point in ("roce_rp", "roce_np"):
        assert f"+ echo 1 > /sys/class/net/{ifc}/ecn/{point}/enable/{ROCE_PRIO}" in lines
    for k, v in RP.items():
        assert f"+ echo {v} > /sys/class/net/{ifc}/ecn/roce_rp/{k}" in lines
    for k, v in NP.items():
        assert f"+ echo {v} > /sys/class/net/{ifc}/ecn/roce_np/{k}" in lines
    assert not any("mlxconfig" in ln for ln in lines)  # only with --persistent
    persistent = _dry(out, "--persistent", env={"DRY_RUN": "1"})
    mlx = [ln for ln in persistent if ln.startswith("+ mlxconfig -y -d ")]
    assert len(mlx) == fabric.nics_per_server  # default devices: the server's NICs
    words = mlx[0].split()
    assert words[5] == "set"
    params = dict(w.split("=") for w in words[6:])
    assert params["ROCE_CC_PRIO_MASK_P1"] == str(1 << ROCE_PRIO)
    for k, v in {**RP, **NP}.items():
        assert params[f"{k.upper()}_P1"] == str(v)
    bad = subprocess.run(["bash", str(out / "nic_setup.sh"), "--bogus"], capture_output=True)
    assert bad.returncode == 2


# -- SONiC config_db fragments ---------------------------------------------------------------

#: JSON schema of the tables, derived from SONiC's YANG models (commit in its $comment).
SCHEMA = json.loads((Path(__file__).parents[1] / "data/sonic/config_db_schema.json").read_text())
#: Tables a complete fragment carries (issue #26: it had no BUFFER_POOL, BUFFER_QUEUE, PFC_WD).
COMPLETE = {"DSCP_TO_TC_MAP", "TC_TO_QUEUE_MAP", "TC_TO_PRIORITY_GROUP_MAP",
            "MAP_PFC_PRIORITY_TO_QUEUE", "PORT_QOS_MAP", "WRED_PROFILE", "SCHEDULER", "QUEUE",
            "BUFFER_POOL", "BUFFER_PROFILE", "BUFFER_PG", "BUFFER_QUEUE", "PFC_WD",
            "CABLE_LENGTH"}


def _validate(value, schema: dict, doc: dict, where: str, row: dict | None = None) -> None:
    """The JSON-schema subset of SCHEMA plus its x- keywords (leafref, range, union, must)."""
    if "enum" in schema:
        assert value in schema["enum"], (where, value)
    if schema.get("type") == "string" or "pattern" in schema:
        assert isinstance(value, str), (where, value)   # config_db: every leaf a string
    if "pattern" in schema:
        alt = schema.get("x-or-pattern")
        assert re.fullmatch(schema["pattern"], value) or (alt and re.fullmatch(alt, value)), \
            (where, value)
    if "x-range" in schema:
        lo, hi = schema["x-range"]
        assert lo <= int(value) <= hi, (where, value)
    if "x-leafref" in schema and not (schema.get("x-or-pattern")
                                      and re.fullmatch(schema["x-or-pattern"], value)):
        assert value in doc.get(schema["x-leafref"], {}), (where, value, "dangling leafref")
    if "x-ge" in schema and row is not None and schema["x-ge"] in row:
        assert int(value) >= int(row[schema["x-ge"]]), (where, value)
    if schema.get("type") == "object":
        _validate_object(value, schema, doc, where)


def _validate_object(value, schema: dict, doc: dict, where: str) -> None:
    assert isinstance(value, dict), (where, value)
    for name in schema.get("required", ()):
        assert name in value, (where, f"missing {name}")
    for key, item in value.items():
        if "propertyNames" in schema:
            assert re.fullmatch(schema["propertyNames"]["pattern"], key), (where, key)
        sub = schema.get("properties", {}).get(key)
        for pat, s in schema.get("patternProperties", {}).items():
            if sub is None and re.fullmatch(pat, key):
                sub = s
        if sub is None:
            extra = schema.get("additionalProperties", True)
            assert extra is not False, (where, f"unknown key {key}")
            sub = extra if isinstance(extra, dict) else {}
        _validate(item, sub, doc, f"{where}/{key}", value)


def check_sonic(doc: dict) -> None:
    """AssertionError unless *doc* is a config_db fragment SONiC's YANG models accept (the
    PORT table it refers to excepted: it is the switch's own)."""
    _validate(doc, SCHEMA, doc, "config_db")
    wd = doc.get("PFC_WD", {})
    poll = int(wd.get("GLOBAL", {}).get("POLL_INTERVAL", 0))
    for key, row in wd.items():       # YANG must: detection/restoration >= POLL_INTERVAL
        for f in ("detection_time", "restoration_time"):
            assert key == "GLOBAL" or f not in row or int(row[f]) >= poll, (key, f)


def test_sonic_fragments_follow_the_yang_schema(written):
    """Fails on the old fragments: no BUFFER_POOL, BUFFER_QUEUE or PFC_WD, comma-joined port
    keys (the YANG lists key one port), BUFFER_PROFILE.pool naming a pool nobody defined."""
    fabric, out, _ = written
    for role in ("tor", "agg", "core"):
        doc = json.loads((out / f"sonic_config_db_{role}.json").read_text())
        assert set(doc) == COMPLETE, set(doc) ^ COMPLETE
        check_sonic(doc)
        dscp = doc["DSCP_TO_TC_MAP"]["ROCE"]
        assert dscp[str(ROCE_DSCP)] == str(ROCE_PRIO) and dscp[str(CNP_DSCP)] == str(CNP_PRIO)
        wred = doc["WRED_PROFILE"]["ROCE_LOSSLESS"]
        assert (int(wred["green_min_threshold"]), int(wred["green_max_threshold"])) == \
            (ECN["kmin_bytes"], ECN["kmax_bytes"])
        for name, prof in doc["BUFFER_PROFILE"].items():  # xoff = the headroom formula
            m = re.fullmatch(r"pg_lossless_(\d+)_(\d+)m_profile", name)
            if m:
                assert int(prof["xoff"]) == headroom_bytes(int(m.group(1)) * 10**6,
                                                           float(m.group(2)))
                assert int(prof["size"]) == int(prof["xon"]) + int(prof["xoff"])
        ports = [k for k in doc["PORT_QOS_MAP"]]
        for p in ports:       # every port: lossless PG 3, its queues, a watchdog, a cable
            assert doc["BUFFER_PG"][f"{p}|{ROCE_PRIO}"]["profile"].startswith("pg_lossless")
            assert doc["BUFFER_QUEUE"][f"{p}|{ROCE_PRIO}"]["profile"] == "egress_lossless_profile"
            assert doc["PFC_WD"][p]["action"] == "drop"
            assert p in doc["CABLE_LENGTH"]["AZURE"]
        pool = int(doc["BUFFER_POOL"]["ingress_lossless_pool"]["size"])
        reserved = sum(int(doc["BUFFER_PROFILE"][r["profile"]]["size"])
                       for k, r in doc["BUFFER_PG"].items() if k.endswith(f"|{ROCE_PRIO}"))
        assert pool + reserved == int(doc["BUFFER_POOL"]["egress_lossless_pool"]["size"])
    tor = json.loads((out / "sonic_config_db_tor.json").read_text())
    assert len(tor["PORT_QOS_MAP"]) == 8  # a k=8 fat-tree ToR: 4 host ports + 4 uplinks
    cables = {v for v in tor["CABLE_LENGTH"]["AZURE"].values()}
    assert cables == {"5m", "40m"}         # host ports and uplinks: the tiers' cables


@pytest.mark.parametrize("bad", [
    {"WRED_PROFILE": {"X": {"green_min": "1"}}},                          # unknown leaf
    {"QUEUE": {"Ethernet0": {}}},                                         # key lacks |queue
    {"PORT_QOS_MAP": {"Ethernet0,Ethernet4": {"pfc_enable": "3"}}},       # two ports, one key
    {"BUFFER_PROFILE": {"p": {"pool": "ingress_lossless_pool", "size": "0"}}},  # no such pool
    {"BUFFER_POOL": {"x": {"type": "ingress"}}},                          # mode is mandatory
    {"PFC_WD": {"Ethernet0": {"detection_time": "50"}}},                  # below 100 ms
    {"PFC_WD": {"GLOBAL": {"POLL_INTERVAL": "300"}, "Ethernet0": {"detection_time": "200"}}},
    {"BUFFER_PROFILE": {"p": {"pool": "x", "size": "0", "dynamic_th": "9"}},
     "BUFFER_POOL": {"x": {"type": "ingress", "mode": "static"}}},        # dynamic_th -8..7
    {"SCHEDULER": {"s": {"type": "DWRR", "weight": 50}}},                 # not a string
])
def test_sonic_schema_check_can_fail(bad):
    with pytest.raises(AssertionError):
        check_sonic(bad)


# -- NVUE ------------------------------------------------------------------------------------

_N = r"\d+"
_TC = r"[0-7](,[0-7])*"
#: Command forms of NVIDIA's NVUE reference ("Set and Unset Commands / QoS") and the Cumulus
#: Linux 5.14 QoS guide used here, with the value ranges they give. One release: no
#: `nv set qos roce cable-length` (Cumulus 5.3 and earlier; 5.4+ set the PFC profile's).
NVUE_GRAMMAR = [
    (r"nv set qos roce mode (lossy|lossless)", None),
    (r"nv set qos roce enable (on|off)", None),
    (r"nv set qos mapping (\S+) trust (l2|l3|port|both)", None),
    (rf"nv set qos mapping (\S+) dscp ({_N}(?:,{_N})*) switch-priority ([0-7])", None),
    (r"nv set qos pfc (\S+) switch-priority ([0-7](?:,[0-7])*)", None),
    (r"nv set qos pfc (\S+) (tx|rx) (enable|disable)", None),
    (rf"nv set qos pfc (\S+) cable-length ({_N})", (1, 100000)),
    (rf"nv set qos congestion-control (\S+) traffic-class ({_TC}) (ecn|red) (enable|disable)",
     None),
    (rf"nv set qos congestion-control (\S+) traffic-class ({_TC}) (min|max)-threshold ({_N})",
     (0, 2**32 - 1)),
    (rf"nv set qos congestion-control (\S+) traffic-class ({_TC}) probability ({_N})",
     (1, 100)),
    (rf"nv set qos egress-scheduler (\S+) traffic-class ({_TC}) mode (dwrr|strict)", None),
    (rf"nv set qos egress-scheduler (\S+) traffic-class ({_TC}) bw-percent ({_N})", (1, 100)),
    (rf"nv set qos pfc-watchdog polling-interval ({_N})", (1, 100000)),
    (rf"nv set qos pfc-watchdog robustness ({_N})", (1, 1000)),
    (r"nv set interface (swp\d+(?:-\d+)?(?:,swp\d+(?:-\d+)?)*) qos pfc-watchdog", None),
    (r"nv config apply", None),
]


def parse_nvue(text: str) -> list[tuple[str, list[str]]]:
    """(form, captured fields) per command; AssertionError on a line outside the grammar."""
    out = []
    for line in text.splitlines():
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        for form, bounds in NVUE_GRAMMAR:
            m = re.fullmatch(form, line.strip())
            if m:
                if bounds:
                    value = int(m.groups()[-1])
                    assert bounds[0] <= value <= bounds[1], line
                out.append((form, list(m.groups())))
                break
        else:
            raise AssertionError(f"not an NVUE command of the grammar: {line!r}")
    return out


def test_nvue_commands_follow_the_grammar(written):
    _, out, _ = written
    for role in ("tor", "agg", "core"):
        text = (out / f"switch_nvue_{role}.txt").read_text()
        cmds = parse_nvue(text)
        assert cmds[-1][0] == "nv config apply"
        assert f"traffic-class {ROCE_PRIO} min-threshold {ECN['kmin_bytes']}" in text
        assert f"traffic-class {ROCE_PRIO} max-threshold {ECN['kmax_bytes']}" in text
        assert f"dscp {ROCE_DSCP} switch-priority {ROCE_PRIO}" in text
        bw = [int(g[-1]) for f, g in cmds if "bw-percent" in f]
        assert sum(bw) <= 100


def test_nvue_one_release_cables_per_tier_and_a_watchdog(written):
    """Fails on the old file: it mixed `nv set qos roce cable-length` (Cumulus <= 5.3) with
    its replacement, put 100 m (latency / 5 ns) on every switch, and enabled no watchdog."""
    fabric, out, _ = written
    want = {"tor": 40, "agg": 300, "core": 300}       # the longest cable of each role's ports
    for role, cable in want.items():
        text = (out / f"switch_nvue_{role}.txt").read_text()
        assert "Cumulus Linux 5.14" in text.splitlines()[0]
        assert "roce cable-length" not in text
        cmds = parse_nvue(text)
        lengths = [int(g[-1]) for f, g in cmds if "cable-length" in f]
        assert lengths == [cable], role
        wd = [g[0] for f, g in cmds if f.startswith("nv set interface")]
        n_ports = len({p for c in port_classes(fabric) if c.role == role for p in c.ports})
        swps = sum(int(b) - int(a) + 1 if b else 1 for a, b in
                   re.findall(r"swp(\d+)(?:-(\d+))?", wd[0]))
        assert len(wd) == 1 and swps == n_ports, role


def test_nvue_grammar_can_fail():
    with pytest.raises(AssertionError):
        parse_nvue("nv set qos congestion-control default-global traffic-class 3 probability 0")
    with pytest.raises(AssertionError):
        parse_nvue("nv set qos ecn on")


# -- nccl.env --------------------------------------------------------------------------------


def test_nccl_env_complete_and_sourceable(written):
    _, out, _ = written
    env_file = out / "nccl.env"
    subprocess.run(["bash", "-n", str(env_file)], check=True)
    proc = subprocess.run(["env", "-i", "bash", "-c", f". {env_file}; env"],
                          capture_output=True, text=True, check=True)
    env = dict(ln.split("=", 1) for ln in proc.stdout.splitlines() if ln.startswith("NCCL_"))
    for name in ("NCCL_SOCKET_IFNAME", "NCCL_IB_GID_INDEX", "NCCL_NET_GDR_LEVEL",
                 "NCCL_TUNER_PLUGIN", "NCCL_TUNER_CONFIG_FILE"):
        assert name in env, name
    assert Path(env["NCCL_TUNER_CONFIG_FILE"]).is_absolute()
    assert Path(env["NCCL_TUNER_CONFIG_FILE"]) == (out / "nccl_tuner.csv").resolve()
    assert env["NCCL_NET_GDR_LEVEL"] in ("LOC", "PIX", "PXB", "PHB", "SYS")
    assert int(env["NCCL_IB_GID_INDEX"]) >= -1


# -- netdev MTU (issue #26 item 5) -------------------------------------------------------------


def test_nic_script_sets_the_netdev_mtu_first(written):
    """Fails on the old script: it never set the netdev MTU (at 1500, RoCE's active MTU is
    1024, while every headroom and CC figure assumes 4096)."""
    from tuner.deploy import MIN_NETDEV_MTU, NETDEV_MTU, ROCE_HEADER_BYTES

    _, out, _ = written
    lines = _dry(out, "--dry-run", "mlx5_3")
    ifc = "mlx5_3_netdev"
    mtu = lines.index(f"+ ip link set dev {ifc} mtu {NETDEV_MTU}")
    assert mtu < lines.index(f"+ mlnx_qos -i {ifc} --trust dscp")
    assert f"+ test $(cat /sys/class/net/{ifc}/mtu) -ge {MIN_NETDEV_MTU}" in lines
    # kernel iboe_get_mtu: IB MTU 4096 needs netdev MTU - 96 B of RoCE headers >= 4096
    assert 4096 + ROCE_HEADER_BYTES <= MIN_NETDEV_MTU <= NETDEV_MTU


def _fake_host(tmp: Path, mtu_after_ip: int) -> tuple[Path, dict]:
    """A sysfs tree with mlx5_0 -> eth9 at MTU 1500 and an `ip` on PATH that sets the MTU to
    *mtu_after_ip* (as a NIC that takes the command, or one that refuses jumbo frames)."""
    sysfs, bindir = tmp / "sys", tmp / "bin"
    (sysfs / "class/infiniband/mlx5_0/device/net/eth9").mkdir(parents=True)
    net = sysfs / "class/net/eth9"
    for d in ("ecn/roce_rp/enable", "ecn/roce_np/enable"):
        (net / d).mkdir(parents=True)
    (net / "mtu").write_text("1500\n")
    bindir.mkdir()
    for tool in ("mlnx_qos", "mlxconfig"):
        (bindir / tool).write_text("#!/bin/sh\nexit 0\n")
    (bindir / "ip").write_text(f"#!/bin/sh\necho {mtu_after_ip} > {net / 'mtu'}\n")
    for f in bindir.iterdir():
        f.chmod(0o755)
    env = {**os.environ, "NIC_SETUP_SYSFS": str(sysfs), "PATH": f"{bindir}:{os.environ['PATH']}"}
    return net, env


@pytest.mark.parametrize("after, code", [(9000, 0), (1500, 2)])
def test_nic_script_refuses_an_mtu_below_roce_4096(written, tmp_path, after, code):
    _, out, _ = written
    net, env = _fake_host(tmp_path, after)
    proc = subprocess.run(["bash", str(out / "nic_setup.sh"), "mlx5_0"], capture_output=True,
                          text=True, env=env)
    assert proc.returncode == code, proc.stderr
    assert int((net / "mtu").read_text()) == after
    if code:
        assert "RoCE active MTU would be below 4096" in proc.stderr
        assert not (net / "ecn/roce_rp/rpg_time_reset").exists()   # stopped before DCQCN
    else:
        assert (net / "ecn/roce_rp/rpg_time_reset").read_text().strip() == str(RP["rpg_time_reset"])
