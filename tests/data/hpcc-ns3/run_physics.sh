#!/bin/sh
# Issue 17's physics criteria on the HPCC ns-3 reference (netsim/validation/physics_ref.py): the
# physics scenarios with the bottleneck switch traced (ENABLE_TRACE 1), on the unmodified
# reference ("plain", RngRun 1-4) and on the reference with its DCQCN rate changes applied
# through its own RdmaHw::ChangeRate ("repaced", NIC-default scenarios, RngRun 1-4), folded
# into physics.json.gz. Traces (mix.tr, 16-130 MB per run) stay in RUNS_DIR.
# usage (from the repository root): tests/data/hpcc-ns3/run_physics.sh NS3_SIMULATION_DIR RUNS_DIR
set -e
SIM=$(cd "$1" && pwd)
RUNS=$2
HERE=tests/data/hpcc-ns3
PY=${PYTHON:-python}
mkdir -p "$RUNS/plain" "$RUNS/repaced" "$RUNS/lib"
# The re-paced build of the point-to-point library: rdma-hw.cc with the four DCQCN rate
# assignments (CheckRateDecreaseMlx, FastRecoveryMlx, ActiveIncreaseMlx, HyperIncreaseMlx,
# lines 668, 703, 719 and 735 at the pinned commit) turned into calls of ChangeRate, linked with
# the other objects of the existing build into a library that LD_LIBRARY_PATH puts first.
sed -e '668s/q->m_rate = \(.*\);$/ChangeRate(q, \1);/' -e '703s/q->m_rate = \(.*\);$/ChangeRate(q, \1);/' \
    -e '719s/q->m_rate = \(.*\);$/ChangeRate(q, \1);/' -e '735s/q->m_rate = \(.*\);$/ChangeRate(q, \1);/' \
    "$SIM/src/point-to-point/model/rdma-hw.cc" > "$RUNS/lib/rdma-hw.cc"
(cd "$SIM" && g++ -O2 -w -fpermissive -std=gnu++11 -march=native -fPIC -pthread \
    -DHAVE_PACKET_H=1 -DHAVE_SQLITE3=1 -DHAVE_IF_TUN_H=1 -Ibuild -Isrc/point-to-point/model \
    -c "$RUNS/lib/rdma-hw.cc" -o "$RUNS/lib/rdma-hw.o" && \
  g++ -shared -pthread -o "$RUNS/lib/libns3.18-point-to-point-optimized.so" \
    $(ls build/src/point-to-point/model/*.o build/src/point-to-point/helper/*.o | grep -v /rdma-hw.cc.1.o) \
    "$RUNS/lib/rdma-hw.o")
$PY -m netsim.validation.physics_ref inputs "$RUNS/plain" > /dev/null
one() {  # one() VARIANT SCENARIO RNGRUN [LIBDIR]
  d="$RUNS/$1/$2"; mkdir -p "$d/run$3"
  [ "$1" = plain ] || cp "$RUNS/plain/$2/"*.txt "$d/"
  cp "$d/config.txt" "$d/topology.txt" "$d/flow.txt" "$d/trace.txt" "$d/run$3/"
  (cd "$d/run$3" && NS_GLOBAL_VALUE="RngRun=$3" LD_LIBRARY_PATH="${4:+$4:}$SIM/build" \
      "$SIM/build/scratch/third" config.txt > stdout.txt)
  echo "$1 $2 run$3"
}
for d in "$RUNS"/plain/*/; do
  name=$(basename "$d")
  for r in 1 2 3 4; do one plain "$name" $r; done
  case "$name" in *-nic-default)
    for r in 1 2 3 4; do one repaced "$name" $r "$RUNS/lib"; done ;;
  esac
done
$PY -m netsim.validation.physics_ref summarize "$HERE/physics.json.gz" \
    --runs plain="$RUNS/plain" --runs repaced="$RUNS/repaced"
