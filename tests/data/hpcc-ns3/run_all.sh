#!/bin/sh
# Run every reference scenario in the HPCC ns-3 simulator and fold the outputs into
# results.json.gz: long-flow scenarios with ns-3 random-number runs 1-4 (its ECN marking
# draws; the targets apply to them), short-flow scenarios with run 1.
# usage (from the repository root): tests/data/hpcc-ns3/run_all.sh NS3_SIMULATION_DIR RUNS_DIR
# NS3_SIMULATION_DIR is the built `simulation/` folder of alibaba-edu/High-Precision-Congestion-Control.
set -e
SIM=$(cd "$1" && pwd)
RUNS=$2
HERE=tests/data/hpcc-ns3
PY=${PYTHON:-python}
COMMIT=$(git -C "$SIM" rev-parse HEAD)
$PY -m netsim.validation.reference ns3-inputs "$RUNS" > /dev/null
for d in "$RUNS"/*/; do
  name=$(basename "$d")
  mkdir -p "$HERE/inputs/$name"
  cp "$d/config.txt" "$d/topology.txt" "$d/flow.txt" "$d/trace.txt" "$HERE/inputs/$name/"
  case "$name" in *-long-*) RUNS_OF="1 2 3 4" ;; *) RUNS_OF="1" ;; esac
  for r in $RUNS_OF; do
    mkdir -p "$d/run$r" "$HERE/outputs/$name/run$r"
    cp "$d/config.txt" "$d/topology.txt" "$d/flow.txt" "$d/trace.txt" "$d/run$r/"
    (cd "$d/run$r" && NS_GLOBAL_VALUE="RngRun=$r" LD_LIBRARY_PATH="$SIM/build" \
        /usr/bin/time -f "%e %M" "$SIM/build/scratch/third" config.txt > stdout.txt 2> time.txt)
    echo "$name run$r $(tail -1 "$d/run$r/time.txt")"
    cp "$d/run$r/fct.txt" "$HERE/outputs/$name/run$r/"
    gzip -9n < "$d/run$r/pfc.txt" > "$HERE/outputs/$name/run$r/pfc.txt.gz"
  done
done
$PY -m netsim.validation.reference ns3-collect "$RUNS" "$HERE/results.json.gz" --commit "$COMMIT"
