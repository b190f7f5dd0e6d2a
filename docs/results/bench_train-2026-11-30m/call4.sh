# call 4: the whole GPU tier with this session's code
. out/prep.sh
set -o pipefail
timeout 500 python3 -m pytest -m gpu tests/gpu -v -p no:cacheprovider 2>&1 | tee $OUT/gpu-tier.log | grep -E "PASSED|FAILED|ERROR|SKIPPED|passed|failed|error" | tail -20
