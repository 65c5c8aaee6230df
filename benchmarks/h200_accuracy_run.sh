#!/usr/bin/env bash
# Issue 46 on a lent one-GPU H200 (docs/device.md: no network, Python 3.12 + torch there, the controller wheels
# carried in .whl/): the quick certification repeated RUNS times (default 20) with inventories/local, each a fresh
# `invoke certify --force` (a still-valid node is otherwise not probed again), then `invoke certify --accuracy` over
# the corpus and these runs, then the GPU suite as one pytest process (`pytest -m gpu`). All inside BUDGET_S
# (default 540 s = 9 min): the certify loop keeps SUITE_S (default 160 s; the suite took 45 s + 30 s on the H200
# before) for the suite and stops early where the next run would eat into it; the suite gets what is left.
#
# Usage, from the repository root on the machine:  OUT=<dir> [RUNS=20] [BUDGET_S=540] bash benchmarks/h200_accuracy_run.sh
# Back under $OUT (8 files at most, the device tool's limit): machine.txt, timings.tsv (one row per run: exit code,
# process wall, stage seconds, probe wall), timings.md (min/median/max), accuracy.md and accuracy.json (the per-gate
# table with these runs), runs.tgz (per run: probe.json, certification.json, summary.json, certify.log),
# pytest-gpu.txt, run.log.
# To publish: unpack runs.tgz into docs/examples/<gpu>x1/accuracy/ (h200x1 or h100x1; run-NN/probe.json is what the
# table reads) and record the figures in that folder's README.md.
set -uo pipefail
OUT=${OUT:?set OUT to the directory for the results}
RUNS=${RUNS:-20}
BUDGET_S=${BUDGET_S:-540}
SUITE_S=${SUITE_S:-160}
T0=$(date +%s)
elapsed() { echo $(( $(date +%s) - T0 )); }
exec > >(tee "$OUT/run.log") 2>&1

export PYTHONUNBUFFERED=1 GRIDREADY_PROBE_PYTHON=${GRIDREADY_PROBE_PYTHON:-/opt/torch/.venv/bin/python3}
export GRIDREADY_ARTIFACTS=/tmp/art NCCL_NVLS_ENABLE=${NCCL_NVLS_ENABLE:-0}
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD PATH=/tmp/site/bin:$PATH

gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
case "$gpu" in  # the inventory names the SKU; an H100 machine certifies as the H100 it is (issue 46's H100 runs)
  *H100*) sed -i 's/sku: H200-SXM-141GB/sku: H100-SXM5-80GB/' inventories/local/cluster.yml; runs=h100x1 ;;
  *) runs=h200x1 ;;
esac
{ nvidia-smi -L; nvidia-smi --query-gpu=driver_version --format=csv,noheader
  "$GRIDREADY_PROBE_PYTHON" -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda)'
  grep -E '^\s+(sku|gpus_per_node|platform):' inventories/local/cluster.yml
  echo "NCCL_NVLS_ENABLE=$NCCL_NVLS_ENABLE RUNS=$RUNS BUDGET_S=$BUDGET_S setup_s=$(elapsed)"; } > "$OUT/machine.txt"
cat "$OUT/machine.txt"

printf 'run\texit\tprocess_s\tstage_s\tprobe_s\tcertified\n' > "$OUT/timings.tsv"
mkdir -p /tmp/runs docs/examples/$runs/accuracy
last=0
for i in $(seq -w 1 "$RUNS"); do
  if [ $(( $(elapsed) + last )) -gt $(( BUDGET_S - SUITE_S )) ]; then echo "budget: stopped before run $i"; break; fi
  id="acc46-run-$i" dir=/tmp/runs/run-$i
  mkdir -p "$dir"
  s=$(date +%s.%N)
  GRIDREADY_RUN_ID=$id python3 -m gridready.program -i local certify --force --json \
    >"$dir/summary.json" 2>"$dir/certify.log"
  rc=$?
  wall=$(python3 -c "import time; print(round(time.time() - $s, 1))")
  last=${wall%.*}
  stage=$GRIDREADY_ARTIFACTS/local/$id/certify
  cp "$stage/probes/localhost/probe.json" "$dir/" 2>/dev/null
  find "$stage" -name certification.json -path '*localhost*' -exec cp {} "$dir/" \; 2>/dev/null
  python3 - "$dir" "$i" "$rc" "$wall" >>"$OUT/timings.tsv" <<'PY'
import json, sys
from pathlib import Path
d, run, rc, wall = Path(sys.argv[1]), *sys.argv[2:]
def read(name):
    try:
        return json.loads((d / name).read_text())
    except (OSError, ValueError):
        return {}
s, p, c = read("summary.json"), read("probe.json"), read("certification.json")
print(f"{run}\t{rc}\t{wall}\t{s.get('seconds')}\t{p.get('wall_s')}\t{c.get('certified')}")
PY
  tail -1 "$OUT/timings.tsv"
  [ -f "$dir/probe.json" ] && mkdir -p "docs/examples/$runs/accuracy/run-$i" \
    && cp "$dir/probe.json" "docs/examples/$runs/accuracy/run-$i/probe.json"
done

python3 - "$OUT/timings.tsv" >"$OUT/timings.md" <<'PY'
import csv, statistics, sys
rows = list(csv.DictReader(open(sys.argv[1]), delimiter="\t"))
print(f"{len(rows)} quick certifications; exit codes {sorted({r['exit'] for r in rows})}; "
      f"certified {sum(r['certified'] == 'True' for r in rows)} of {len(rows)}")
for key in ("process_s", "stage_s", "probe_s"):
    vals = [float(r[key]) for r in rows if r[key] not in ("", "None")]
    if vals:
        print(f"- {key}: min {min(vals):.1f}, median {statistics.median(vals):.1f}, max {max(vals):.1f}")
PY
cat "$OUT/timings.md"

python3 -m gridready.program -i local certify --accuracy >"$OUT/accuracy.md"; echo "accuracy: exit $?"
python3 -m gridready.program -i local certify --accuracy --json >"$OUT/accuracy.json" 2>/dev/null
tar czf "$OUT/runs.tgz" -C /tmp/runs .

left=$(( BUDGET_S - $(elapsed) - 15 ))
echo "GPU suite: ${left} s left"
if [ "$left" -gt 30 ]; then
  timeout "$left" python3 -m pytest -p no:cacheprovider -o addopts="--strict-markers" -m gpu tests/gpu -q -rs \
    >"$OUT/pytest-gpu.txt" 2>&1
  echo "pytest -m gpu: exit $? ($(tail -1 "$OUT/pytest-gpu.txt"))"
else
  echo "no time left for the GPU suite" | tee "$OUT/pytest-gpu.txt"
fi
echo "total $(elapsed) s"
