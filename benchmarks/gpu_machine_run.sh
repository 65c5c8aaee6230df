#!/usr/bin/env bash
# One run on a lent GPU machine (docs/device.md): install the carried controller wheels, build nccl-tests from the
# vendored tarball, then `invoke certify` with the `local` inventory, the probe-vs-best benchmark and `pytest -m gpu`.
# Usage, from the repository root there: OUT=<dir> bash benchmarks/gpu_machine_run.sh [nccl-tests tarball]
set -uo pipefail
OUT=${OUT:?set OUT to the directory for the results}
TARBALL=${1:-.vendor/nccl-tests-2.19.6.tar.gz}
mkdir -p /tmp/raw
export PYTHONUNBUFFERED=1 GRIDREADY_PROBE_PYTHON=/opt/torch/.venv/bin/python3 GRIDREADY_ARTIFACTS=/tmp/art
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD PATH=/tmp/site/bin:$PATH
{ nvidia-smi -L; echo "NCCL_NVLS_ENABLE=${NCCL_NVLS_ENABLE:-unset}"; } | tee "$OUT/machine.txt"

# nccl-tests against the pip wheel's NCCL (its lib has libnccl.so.2 only: link libnccl.so beside the headers)
if [ -f "$TARBALL" ]; then
  wheel=$(python3 -c 'import nvidia.nccl as m; print(list(m.__path__)[0])')
  mkdir -p /tmp/nt /tmp/ncclhome/lib && tar xzf "$TARBALL" -C /tmp/nt
  ln -sfn "$wheel/include" /tmp/ncclhome/include && ln -sf "$wheel/lib/libnccl.so.2" /tmp/ncclhome/lib/libnccl.so
  src=$(ls -d /tmp/nt/nccl-tests-*)
  if make -C "$src" -j"$(nproc)" MPI=0 CUDA_HOME=/usr/local/cuda NCCL_HOME=/tmp/ncclhome \
      NVCC_GENCODE="-gencode=arch=compute_90,code=sm_90" >/tmp/raw/nccl-tests-build.log 2>&1; then
    export NCCL_TESTS_DIR=$src/build
    mkdir -p /opt/nccl-tests && ln -sfn "$src" /opt/nccl-tests/current  # where the probe looks (nccl role layout)
    mkdir -p /opt/nccl-tests/current/bin && ln -sf "$src"/build/*_perf /opt/nccl-tests/current/bin/
  fi
fi

t0=$(date +%s)
python3 -m gridready.program -i local certify --json >"$OUT/certify.json" 2>"$OUT/certify.log"
echo "gridready certify: exit $? in $(( $(date +%s) - t0 )) s" | tee -a "$OUT/machine.txt"
tar czf "$OUT/certify-artifacts.tgz" -C /tmp/art .

python3 benchmarks/probe_vs_best.py --profile quick --out "$OUT/probe_vs_best.json" --md "$OUT/probe_vs_best.md" \
  --raw-dir /tmp/raw >/dev/null; echo "probe_vs_best: exit $?" | tee -a "$OUT/machine.txt"
nvidia-smi -q -x >/tmp/raw/nvidia-smi-q-x.xml
tar czf "$OUT/raw.tgz" -C /tmp/raw .  # nccl-tests build log and outputs, the -q -x capture
python3 -m pytest -p no:cacheprovider -o addopts="--strict-markers" -m gpu tests/gpu -q -rs 2>&1 | tee "$OUT/pytest-gpu.txt" | tail -5
