#!/usr/bin/env bash
# GPU tests in separate processes, new or risky groups first, so that a sticky CUDA error (an illegal address
# poisons the context for the rest of the process) fails only its own group. Then the rest of the suite.
#   bash scripts/device_groups.sh "FILES..." "FILES..." ...    (after scripts/device_run.sh has built)
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-$PWD/_device/out}
export PYTHONUNBUFFERED=1
[ -d _device/data ] && export GPUOPT_DATA_DIR=${GPUOPT_DATA_DIR:-$PWD/_device/data}
status=0
ignore=()
for group in "$@"; do
    echo "== group: $group" | tee -a "$OUT/pytest.log"
    python3 -m pytest -q -ra -p no:cacheprovider $group >>"$OUT/pytest.log" 2>&1 || status=1
    tail -1 "$OUT/pytest.log"
    for f in $group; do ignore+=(--ignore="$f"); done
done
echo "== the rest of the suite" | tee -a "$OUT/pytest.log"
python3 -m pytest -q -ra -p no:cacheprovider "${ignore[@]}" tests >>"$OUT/pytest.log" 2>&1 || status=1
tail -1 "$OUT/pytest.log"
exit $status
