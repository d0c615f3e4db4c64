#!/usr/bin/env bash
# One call on the GPU machine: build gpuopt for the H200 (incrementally in build/device, kept while the
# machine stays warm), run the GPU tests, optionally the
# quick benchmarks and a compute-sanitizer pass, and gather logs and results under $OUT.
#
#   bash scripts/device_run.sh [tests[=FILE,...]] [sanitizer] [bench[=NAME,...]] [full] [tune[=LAYER,...]] [readme]
#
# With no arguments: tests (all of them; tests=FILE,... runs those files). tune: the conv2d auto
# sweep (the opt-in study tune_conv_auto; tune=LAYER,... runs those layers), its files
# (tune_conv_auto.csv/.json/.log) and the console log packed in $OUT/tune.tgz. readme: every README command
# as typed (.ci/newcomer.py --gpu --installed), its log in $OUT/readme.log.
# Results are recorded with the commit in $GPUOPT_COMMIT (the
# copy on the device has no .git). The machine has no network: the build uses the Python
# packages already there (pip install --no-build-isolation --no-deps). Real data travels
# in the git-ignored _device/data folder (copy ../shared/data there, carry it); set
# GPUOPT_DATA_DIR otherwise.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-$PWD/_device/out}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
[ -d _device/data ] && export GPUOPT_DATA_DIR=${GPUOPT_DATA_DIR:-$PWD/_device/data}
steps=("$@")
[ ${#steps[@]} -eq 0 ] && steps=(tests)
status=0

echo "== device"
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.mem --format=csv | tee "$OUT/nvidia-smi.csv"

echo "== build (GPUOPT_CUDA_ARCHITECTURES=${GPUOPT_CUDA_ARCHITECTURES:-auto}: this GPU's architecture)"
start=$(date +%s)
if ! GPUOPT_CUDA_ARCHITECTURES=${GPUOPT_CUDA_ARCHITECTURES:-auto} GPUOPT_PTXAS_VERBOSE=ON \
     python3 -m pip install --no-build-isolation --no-deps -Cbuild-dir=build/device -v . >"$OUT/build.log" 2>&1; then
    tail -60 "$OUT/build.log"
    exit 1
fi
echo "built in $(( $(date +%s) - start )) s"
grep -E "ptxas info|bytes stack frame|spill" "$OUT/build.log" >"$OUT/ptxas.txt" || true
(cd /tmp && python3 -m gpuopt info) | tee "$OUT/info.json"

for step in "${steps[@]}"; do
    case "$step" in
    tests*)
        files=${step#tests}; files=${files#=}; files=${files//,/ }
        echo "== GPU and CPU tests ${files:-(all)}"
        python3 -m pytest -q -ra --junitxml="$OUT/pytest.xml" ${files:-tests} 2>&1 | tee "$OUT/pytest.log"
        [ "${PIPESTATUS[0]}" -eq 0 ] || status=1
        ;;
    tune*)
        layers=${step#tune}; layers=${layers#=}
        echo "== conv2d auto sweep ${layers:-(all layers)}"
        mkdir -p "$OUT/tune"
        GPUOPT_TUNE_LAYERS="$layers" python3 benchmarks/run_all.py tune_conv_auto --quiet --out "$OUT/tune" 2>&1 \
            | tee "$OUT/tune/tune.log"
        [ "${PIPESTATUS[0]}" -eq 0 ] || status=1
        tar -czf "$OUT/tune.tgz" -C "$OUT" tune && rm -rf "$OUT/tune"
        ;;
    sanitizer)
        echo "== compute-sanitizer memcheck on the GPU tests"
        # API errors are off: the tests provoke some on purpose (a 1 PiB allocation).
        # No leak check: the caching pool and the cuBLAS/cuDNN handles live until exit.
        # GPUOPT_SANITIZER_TESTS / GPUOPT_SANITIZER_K narrow the run (memcheck is slow).
        compute-sanitizer --tool memcheck --report-api-errors no --error-exitcode 3 \
            python3 -m pytest -q -m gpu -p no:cacheprovider ${GPUOPT_SANITIZER_K:+-k "$GPUOPT_SANITIZER_K"} \
            ${GPUOPT_SANITIZER_TESTS:-tests} >"$OUT/memcheck.log" 2>&1
        rc=$?
        tail -25 "$OUT/memcheck.log"
        [ $rc -eq 0 ] || status=1
        ;;
    bench*)
        names=${step#bench}; names=${names#=}
        echo "== benchmarks ${names:-all} (quick unless 'full' given)"
        quick=--quick
        for s in "${steps[@]}"; do [ "$s" = full ] && quick=; done
        python3 benchmarks/run_all.py ${names:+${names//,/ }} $quick --out "$OUT/bench" || status=1
        # Only 8 files come back from the device: ship the results folder as one archive.
        tar -czf "$OUT/bench.tgz" -C "$OUT" bench && rm -rf "$OUT/bench"
        ;;
    readme)
        echo "== the README's commands as typed (GPU blocks too; the test suite and the hour-long reproduce apart)"
        # The README's data path is ../shared/data beside the checkout: here it is the carried _device/data.
        [ -e ../shared/data ] || { mkdir -p ../shared && ln -s "$PWD/_device/data" ../shared/data; }
        nb=--no-notebooks
        python3 -c "import nbclient, ipykernel" 2>/dev/null && nb=
        python3 .ci/newcomer.py . --elsewhere /tmp/gpuopt-elsewhere --gpu --installed $nb \
            --except '^python -m pytest' --except '^python -m gpuopt reproduce' 2>&1 | tee "$OUT/readme.log"
        [ "${PIPESTATUS[0]}" -eq 0 ] || status=1
        ;;
    full) ;;
    *) echo "unknown step $step"; status=2 ;;
    esac
done
exit $status
