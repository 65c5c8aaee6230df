#!/usr/bin/env bash
# The wheels benchmarks/mutation_device_run.sh installs on a lent machine (Python 3.12, no package index): mutmut,
# pytest and what gridready and the tests of benchmarks/mutation_score.py import beyond what the machine has (torch,
# numpy, matplotlib, rich, PyYAML, Jinja2). Into .whl/ (git-ignored), at the versions of the development .venv.
#
#   bash benchmarks/mutation_wheels.sh [DIR]      # default .whl; then carry it (docs/mutation.md)
set -eu -o pipefail
cd "$(dirname "$0")/.."
DIR=${1:-.whl}
PY=${PY:-.venv/bin/python}
[ -x "$PY" ] || PY=python3
mkdir -p "$DIR"
"$PY" -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
    --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_17_x86_64 \
    --platform manylinux2014_x86_64 --platform manylinux1_x86_64 -d "$DIR" \
    mutmut==3.8.1 libcst==1.9.0 setproctitle==1.3.8 textual==8.2.8 mdit-py-plugins==0.7.0 linkify-it-py==2.2.0 \
    uc-micro-py markdown-it-py==4.3.0 mdurl==0.1.2 platformdirs==4.14.9 pygments==2.21.0 click==8.5.1 \
    coverage==7.18.0 pytest==9.2.0 pluggy==1.7.0 iniconfig==2.3.1 packaging==26.4 pytest-xdist==3.8.0 \
    execnet==2.1.2 pydantic==2.14.4 pydantic-core==2.50.5 annotated-types==0.8.0 typing-inspection==0.4.5 \
    typing-extensions==4.16.0 ansible-core==2.19.14 ansible-runner==2.4.3 resolvelib==1.2.1 cryptography==51.0.1 \
    cffi==2.1.1 pycparser==3.12 pexpect==4.9.0 ptyprocess==0.7.0 python-daemon==3.1.2 lockfile==0.12.2 \
    invoke==3.0.3 pulumi==3.272.0 pulumi-kubernetes==4.34.2 dill==0.4.1 semver==3.2.0 parver==1.0.1.post0 \
    grpcio==1.85.4 protobuf==6.33.6 googleapis-common-protos==1.76.0 opentelemetry-api==1.45.2 \
    opentelemetry-sdk==1.45.2 opentelemetry-semantic-conventions==0.66b2 opentelemetry-instrumentation==0.66b2 \
    opentelemetry-instrumentation-grpc==0.66b2 opentelemetry-exporter-otlp-common==0.66b2 \
    opentelemetry-exporter-otlp-proto-common==1.45.2 opentelemetry-exporter-otlp-proto-grpc==1.45.2 \
    opentelemetry-proto==1.45.2 tritonclient==2.73.0 python-rapidjson==1.25 jsonschema==4.26.0 \
    jsonschema-specifications==2025.9.1 referencing==0.37.0 rpds-py==2026.9.1 kubernetes-validate==1.37.0 \
    importlib-resources==7.1.0 ruamel.yaml==0.19.1 prometheus-client wrapt==2.5.2 attrs==26.1.0
du -sh "$DIR"
# kubernetes_validate carries the schemas of every Kubernetes release (22 MB); keep the default kubernetes_version's
# (spec/serving.py), 1.30 and 1.33 (tests name them), so that the wheels and the working tree stay under the device tool's 64 MiB
KV=$(ls "$DIR"/kubernetes_validate-*.whl)
KEEP=${KEEP_K8S:-v1.30.0 v1.32.0 v1.33.0}
TMP=$(mktemp -d)
KEPT=()
for v in $KEEP; do KEPT+=(! -name "$v-local" ! -name "$v-local-strict"); done
if [ "$(unzip -Z1 "$KV" | grep -c '^kubernetes_validate/kubernetes-json-schema/v1.37.0-local/')" != 0 ]; then
    (cd "$TMP" && unzip -q "$OLDPWD/$KV" && find kubernetes_validate/kubernetes-json-schema -mindepth 1 -maxdepth 1 \
        -type d "${KEPT[@]}" -exec rm -rf {} + && rm "$OLDPWD/$KV" && zip -q -r "$OLDPWD/$KV" .)
fi
rm -rf "$TMP"
du -sh "$DIR"
