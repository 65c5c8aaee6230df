#!/usr/bin/env bash
# benchmarks/mutation_score.py on a lent machine of 16 cores (the H200 host's CPUs; no GPU work), docs/mutation.md.
#
#   OUT=<dir> UNTIL=HH:MM [CHILDREN=14] [WHEELS=.devrun-mut/wheels] [STATE=.devrun-mut/state.tar.gz] \
#       bash benchmarks/mutation_device_run.sh [mutation_score.py arguments, e.g. --modules probe/kernel_log]
#
# The machine has Python 3.12 and no package index: the wheels of mutmut and of what gridready and its tests import
# travel in $WHEELS (docs/examples/mutation/README.md lists them). $STATE, when present, is mutmut's results of an
# earlier command (mutants/gridready and mutmut-stats.json of the work directory): they are unpacked with fresh
# mtimes, so mutmut keeps its mutants and goes on with those not run yet. The results of this command go to
# $OUT/state.tar.gz, mutmut's own log to $OUT/mutmut.log.gz, this script's to $OUT/run.log.
set -u -o pipefail
cd "$(dirname "$0")/.."
: "${OUT:?OUT must name a folder}" "${UNTIL:?UNTIL must be HH:MM (UTC)}"
CHILDREN=${CHILDREN:-14}
WHEELS=${WHEELS:-.devrun-mut/wheels}
STATE=${STATE:-.devrun-mut/state.tar.gz}
WORK=${WORK:-/tmp/gridready-mutation}
SITE=${SITE:-/tmp/site}
exec > >(tee -a "$OUT/run.log") 2>&1
echo "start $(date -u +%FT%TZ) on $(nproc) CPUs, $(python3 -V)"
if [ ! -x "$SITE/bin/mutmut" ]; then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target "$SITE" "$WHEELS"/*.whl || exit 1
fi
export PYTHONPATH=$SITE PATH=$SITE/bin:$PATH
echo "wheels installed $(date -u +%T)"
mkdir -p "$WORK/mutants"
if [ -f "$STATE" ]; then
    tar -xzmf "$STATE" -C "$WORK" && echo "results of an earlier command unpacked from $STATE"
fi
python3 benchmarks/mutation_score.py --workdir "$WORK" --one-run --max-children "$CHILDREN" \
    --mutmut "$SITE/bin/mutmut" --until "$UNTIL" "$@"
rc=$?
echo "mutation_score.py exit $rc at $(date -u +%T)"
gzip -c "$WORK/mutation-run.log" > "$OUT/mutmut.log.gz"
tail -c 4000 "$WORK/mutation-run.log" 2>/dev/null | tr '\r' '\n' | tail -25
(cd "$WORK" && tar -czf "$OUT/state.tar.gz" mutants/gridready $(ls mutants/mutmut-stats.json 2>/dev/null)) \
    && ls -l "$OUT/state.tar.gz"
exit $rc
