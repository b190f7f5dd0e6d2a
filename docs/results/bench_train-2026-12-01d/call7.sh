# call 7 (seventeenth session): bench_train --repeat on the H200, through --smoke (numerics included)
. out/prep.sh
timeout 190 python3 scripts/bench_train --smoke --repeat 2 --out $OUT/smoke > $OUT/smoke.log 2>&1
echo "rc=$?"
grep -v "^wrote" $OUT/smoke.log | tail -14
cd $OUT && tar czf smoke.tgz smoke smoke.log && rm -rf smoke && ls -la
