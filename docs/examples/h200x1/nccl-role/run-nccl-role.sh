#!/usr/bin/env bash
# Runs the gridready_nccl role for real on the lent one-GPU H200 (docs/device.md), then all_reduce_perf -g 1.
# Usage (repository root, wheels in ./whl, the vendored tarball beside this script): run-nccl-role.sh <outdir>
set -euo pipefail
out=${1:?outdir}
here=$(cd "$(dirname "$0")" && pwd)
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site whl/*.whl
export PYTHONPATH=/tmp/site ANSIBLE_CONFIG=$PWD/ansible.cfg ANSIBLE_ROLES_PATH=$PWD/roles
nccl=$(/opt/torch/.venv/bin/python3 -c 'import importlib.metadata as m; print(m.version("nvidia-nccl-cu13"))')
tarball=$here/nccl-tests-2.19.6.tar.gz
{ echo "# $(date -u +%FT%TZ) $(uname -m); nvidia-nccl-cu13 $nccl; $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader)"
  echo "# $(/usr/local/cuda/bin/nvcc --version | tail -n1)"; } | tee "$out/environment.txt"
python3 /tmp/site/bin/ansible-playbook -i localhost, -c local "$here/nccl-tests-build.yml" \
  -e gridready_nccl_source=wheel -e "gridready_nccl_version=$nccl" -e gridready_nccl_cuda=13.0 \
  -e gridready_nccl_tests_version=2.19.6 -e "gridready_nccl_tests_src_tarball=$tarball" \
  -e "gridready_nccl_tests_checksum=sha256:$(sha256sum "$tarball" | cut -d' ' -f1)" \
  -e gridready_nccl_tests_mpi=false -e '{"gridready_nccl_tests_build_packages": []}' 2>&1 | tee "$out/ansible-run1.txt"
# idempotence: the second run must change nothing
python3 /tmp/site/bin/ansible-playbook -i localhost, -c local "$here/nccl-tests-build.yml" \
  -e gridready_nccl_source=wheel -e "gridready_nccl_version=$nccl" -e gridready_nccl_cuda=13.0 \
  -e gridready_nccl_tests_version=2.19.6 -e "gridready_nccl_tests_src_tarball=$tarball" \
  -e "gridready_nccl_tests_checksum=sha256:$(sha256sum "$tarball" | cut -d' ' -f1)" \
  -e gridready_nccl_tests_mpi=false -e '{"gridready_nccl_tests_build_packages": []}' 2>&1 | tee "$out/ansible-run2.txt"
cp /opt/nccl-tests/src/nccl-tests-2.19.6/build.log "$out/nccl-tests-2.19.6-build.log"
cp /etc/gridready/facts.d/nccl.json "$out/nccl-facts.json"
lib=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["lib_dir"])' /etc/gridready/facts.d/nccl.json)
ldd /opt/nccl-tests/current/bin/all_reduce_perf | grep -i nccl | tee "$out/ldd.txt" || true
LD_LIBRARY_PATH=$lib /opt/nccl-tests/current/bin/all_reduce_perf -b 8 -e 1G -f 4 -g 1 2>&1 | tee "$out/all_reduce_perf_1gpu.txt"
