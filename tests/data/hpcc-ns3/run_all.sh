#!/bin/sh
# Run every reference scenario in the HPCC ns-3 simulator and fold the outputs into results.json.
# usage (from the repository root): tests/data/hpcc-ns3/run_all.sh NS3_SIMULATION_DIR RUNS_DIR
# NS3_SIMULATION_DIR is the built `simulation/` folder of alibaba-edu/High-Precision-Congestion-Control.
set -e
SIM=$(cd "$1" && pwd)
RUNS=$2
HERE=tests/data/hpcc-ns3
PY=${PYTHON:-python}
COMMIT=$(git -C "$SIM" rev-parse HEAD)
$PY -m netsim.cc.reference ns3-inputs "$RUNS" > /dev/null
for d in "$RUNS"/*/; do
  name=$(basename "$d")
  (cd "$d" && LD_LIBRARY_PATH="$SIM/build" /usr/bin/time -f "%e %M" \
      "$SIM/build/scratch/third" config.txt > stdout.txt 2> time.txt)
  echo "$name $(tail -1 "$d/time.txt")"
  mkdir -p "$HERE/inputs/$name" "$HERE/outputs/$name"
  cp "$d/config.txt" "$d/topology.txt" "$d/flow.txt" "$d/trace.txt" "$HERE/inputs/$name/"
  cp "$d/fct.txt" "$HERE/outputs/$name/"
  gzip -9n < "$d/pfc.txt" > "$HERE/outputs/$name/pfc.txt.gz"
done
$PY -m netsim.cc.reference ns3-collect "$RUNS" "$HERE/results.json.gz" --commit "$COMMIT"
