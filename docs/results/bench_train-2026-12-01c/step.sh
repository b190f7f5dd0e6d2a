# one pending_measurements step per device call: bash out/step.sh STEP OUTER_TIMEOUT
. out/prep.sh
step=$1
timeout ${2:-570} python3 scripts/gpu/pending_measurements $step --out $OUT/m
echo "step rc=$?"
grep -v "^wrote" $OUT/m/$step.log | tail -14
cd $OUT/m/$step && for f in engine-*.log; do [ -f "$f" ] && gzip -1 "$f"; done
tar czf ../../$step.tgz --exclude='engine-*.log.gz' . ../$step.log && mv engine-*.log.gz ../../ 2>/dev/null
cd $OUT && rm -rf m && ls -la
