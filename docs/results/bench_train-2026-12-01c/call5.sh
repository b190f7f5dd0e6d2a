# call 5 (sixteenth session): the GPU test tier with the runs-of-uses core
. out/prep.sh
timeout 500 python3 -m pytest -m gpu tests/gpu -v -p no:cacheprovider > $OUT/gpu-tier.log 2>&1
echo "pytest rc=$?"; tail -15 $OUT/gpu-tier.log
