#!/usr/bin/env bash
# benchmarks/mutation_score.py on a lent machine of 16 cores (the GPU host's CPUs; no GPU work), docs/mutation.md.
#
#   OUT=<dir> UNTIL=HH:MM [GRIDREADY_COMMIT=<sha>] [WHEELS=.whl] [STATE=<tar.gz>] \
#       bash benchmarks/mutation_device_run.sh --shard 1/3 --jobs 4 --max-children 4
#
# The machine has Python 3.12 and no package index: the wheels of mutmut and of what gridready and its tests import
# travel in $WHEELS (benchmarks/mutation_wheels.sh downloads them). $STATE, when present, is this script's
# state.tar.gz of an earlier command (mutation_score.py --pack: the part folders' mutated modules, their results and
# mutmut-stats.json; --pack of a work folder here makes one too): unpacked with fresh mtimes,
# mutmut keeps its results and goes on with the mutants not run yet. The results go to $OUT/state.tar.gz (every
# part's mutants and results), $OUT/meta.tar.gz (the per-mutant results alone, enough for --report-only), mutmut's
# logs to $OUT/mutmut-<part>.log.gz, this script's to $OUT/run.log.
set -u -o pipefail
cd "$(dirname "$0")/.."
REPO=$PWD
: "${OUT:?OUT must name a folder}" "${UNTIL:?UNTIL must be HH:MM (UTC)}"
WHEELS=${WHEELS:-.whl}
STATE=${STATE:-/nonexistent}
WORK=${WORK:-/tmp/gridready-mutation}
# one install folder per wheel set: a warm machine keeps /tmp between calls, and a folder installed from an older
# set (it is reused when its mutmut is there) would run the older wheels (2026-12-07: kubernetes_validate without 1.30)
SITE=${SITE:-/tmp/site-$(ls "$WHEELS" | md5sum | cut -c1-12)}
PY=${PY:-python3}
exec > >(tee -a "$OUT/run.log") 2>&1
echo "start $(date -u +%FT%TZ) on $(nproc) CPUs, $($PY -V), commit ${GRIDREADY_COMMIT:-unknown}: $*"
# two versions of one distribution stop pip's install (a .whl/ left on the machine by other work and merged with the
# carried one did, 2026-12-06): name them and stop before anything runs
dupes=$(ls "$WHEELS"/*.whl | sed 's|.*/||; s|-[0-9].*||' | tr 'A-Z-' 'a-z_' | sort | uniq -d)
if [ -n "$dupes" ]; then
    echo "$WHEELS holds two versions of: $dupes (carry the wheels alone, e.g. carry .whl, which replaces the folder)"
    exit 2
fi
if [ ! -x "$SITE/bin/mutmut" ]; then
    $PY -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target "$SITE" "$WHEELS"/*.whl || exit 1
fi
export PYTHONPATH=$SITE PATH=$SITE/bin:$PATH
echo "wheels installed $(date -u +%T)"
mkdir -p "$WORK"
if [ -f "$STATE" ]; then
    tar -xzmf "$STATE" -C "$WORK" && echo "results of an earlier command unpacked from $STATE"
fi
$PY benchmarks/mutation_score.py --workdir "$WORK" --mutmut "$SITE/bin/mutmut" --until "$UNTIL" "$@"
rc=$?
echo "mutation_score.py exit $rc at $(date -u +%T)"
cd "$WORK" || exit 1
for part in part-*/; do
    part=${part%/}
    gzip -c "$part/mutation-run.log" > "$OUT/mutmut-$part.log.gz" 2>/dev/null
    echo "== $part"; tail -c 3000 "$part/mutation-run.log" 2>/dev/null | tr '\r' '\n' | grep -v '^\s*$' | tail -6
done
tar -czf "$OUT/meta.tar.gz" $(find part-* -path '*/mutants/gridready/*' -name '*.meta') && ls -l "$OUT/meta.tar.gz"
$PY "$REPO/benchmarks/mutation_score.py" --workdir "$WORK" --pack "$OUT/state.tar.gz" && ls -l "$OUT/state.tar.gz"
exit $rc
