#!/usr/bin/env bash
# issue 28 device run: provision --check and certify (quick) with the local inventory. Usage: bash .whl/run28.sh
set -uo pipefail
OUT=${OUT:?}
L=$OUT/log.txt
log() { echo "$*" | tee -a "$L"; }
export PYTHONUNBUFFERED=1 GRIDREADY_ARTIFACTS=/tmp/art
log "date: $(date -u +%FT%TZ)"; { nvidia-smi -L; nproc; python3 --version; which python3; echo "NCCL_NVLS_ENABLE=${NCCL_NVLS_ENABLE:-unset}"; } 2>&1 | tee -a "$L"
log "git head of the carried tree: $(git rev-parse HEAD 2>/dev/null || echo n/a)"
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl; log "pip install wheels: exit $?"
export PYTHONPATH=/tmp/site:$PWD PATH=/tmp/site/bin:$PATH
python3 -c 'import ansible, ansible_runner, invoke, pydantic; print("ansible", ansible.__version__ if hasattr(ansible,"__version__") else "?", "pydantic", pydantic.VERSION)' 2>&1 | tee -a "$L"
# nccl-tests from the vendored tarball, in the background (as benchmarks/gpu_machine_run.sh)
(
  wheel=$(python3 -c 'import nvidia.nccl as m; print(list(m.__path__)[0])')
  mkdir -p /tmp/nt /tmp/ncclhome/lib && tar xzf .whl/nccl-tests-2.19.6.tar.gz -C /tmp/nt
  ln -sfn "$wheel/include" /tmp/ncclhome/include && ln -sf "$wheel/lib/libnccl.so.2" /tmp/ncclhome/lib/libnccl.so
  src=$(ls -d /tmp/nt/nccl-tests-*)
  t=$(date +%s)
  make -C "$src" -j"$(nproc)" MPI=0 CUDA_HOME=/usr/local/cuda NCCL_HOME=/tmp/ncclhome \
      NVCC_GENCODE="-gencode=arch=compute_90,code=sm_90" >/tmp/nccl-tests-build.log 2>&1; rc=$?
  echo "nccl-tests build: exit $rc in $(( $(date +%s) - t )) s" > /tmp/nccl-build-rc
  if [ $rc = 0 ]; then mkdir -p /opt/nccl-tests && ln -sfn "$src" /opt/nccl-tests/current \
     && mkdir -p /opt/nccl-tests/current/bin && ln -sf "$src"/build/*_perf /opt/nccl-tests/current/bin/; fi
) &
bpid=$!
dpkg -i .whl/deb/*.deb >/tmp/dpkg.log 2>&1; log "dpkg -i .whl/deb/*.deb (python3-apt 2.7.7ubuntu5.3, python-apt-common, distro-info-data, python3-packaging 24.0-1): exit $?"; tail -3 /tmp/dpkg.log >> "$L"
log "before: $(ls -d /opt/gridready/probe-runtime 2>&1); python3-venv: $(dpkg-query -W -f='${Status} ${Version}' python3-venv 2>&1); python3-packaging: $(dpkg-query -W -f='${Status}' python3-packaging 2>&1)"
log '$ python3 -m invoke -f inventories/local/invoke.yaml provision --check'
t0=$(date +%s.%N)
python3 -m invoke -f inventories/local/invoke.yaml provision --check >"$OUT/provision_check.out" 2>&1; rc=$?
log "provision --check: exit $rc in $(python3 -c "print(round($(date +%s.%N)-$t0,1))") s"
log "after: $(ls -d /opt/gridready/probe-runtime 2>&1)"
wait $bpid; cat /tmp/nccl-build-rc | tee -a "$L"; tail -3 /tmp/nccl-tests-build.log >> "$L"
ls /opt/nccl-tests/current/bin >> "$L" 2>&1
export PATH=$PWD/.whl/shim:$PATH; log "ssh shim on PATH: $(command -v ssh)"
for i in 1 2; do
  f=""; [ $i = 2 ] && f="--force"
  log "\$ GRIDREADY_PROBE_PYTHON=/opt/torch/.venv/bin/python3 python3 -m invoke -f inventories/local/invoke.yaml certify $f"
  t0=$(date +%s.%N)
  GRIDREADY_PROBE_PYTHON=/opt/torch/.venv/bin/python3 python3 -m invoke -f inventories/local/invoke.yaml certify $f >"$OUT/certify_run$i.out" 2>&1; rc=$?
  log "certify run $i: exit $rc in $(python3 -c "print(round($(date +%s.%N)-$t0,1))") s"
done
log "ssh-shim calls: $(wc -l < /tmp/ssh-shim.log 2>/dev/null)"; cut -c1-160 /tmp/ssh-shim.log >> "$L" 2>/dev/null
find /tmp/art -name summary.json | sort | tee -a "$L"
tar czf "$OUT/art.tgz" -C /tmp/art . /tmp/nccl-tests-build.log 2>/dev/null
python3 - <<'PY' 2>&1 | tee -a "$L"
import json, glob, os, shutil
out = os.environ["OUT"]
for stage in ("provision", "certify"):
    files = sorted(glob.glob(f"/tmp/art/**/{stage}/summary.json", recursive=True), key=os.path.getmtime)
    for n, f in enumerate(files, 1):
        shutil.copy(f, f"{out}/{stage}_summary_{n}.json" if stage == "certify" else f"{out}/provision_summary.json")
        d = json.load(open(f))
        print(f"== {stage} {n}: {f} status={d.get('status')} exit_code={d.get('exit_code')} seconds={d.get('seconds')} data={ {k: v for k, v in (d.get('data') or {}).items() if not isinstance(v, (dict, list))} }")
        for h, o in (d.get("hosts") or {}).items():
            det = o.get("detail") or {}
            print(f"  host {h}: status={o.get('status')} {json.dumps({k: v for k, v in o.items() if k != 'detail'})[:600]}")
            for t in det.get("changed_tasks", []) if isinstance(det, dict) else []:
                print("    changed:", t)
        for m in d.get("messages") or []:
            print("  msg:", m)
PY
ls -la "$OUT" | tee -a "$L"
