# call 1 (fourteenth session): GPT-2 XL at 75%, settled (5 warm-up iterations), engine logs:
# the default against exact positions (a write per launch), a 4x correlation table, the launch observer
. out/prep.sh
mkdir -p $OUT/r
DEEPUM_ENGINE_LOG=$OUT/r/engine-%p.log timeout 560 python3 scripts/bench_train gpt2-xl --budgets 0.75 \
  --runs deepum,deepum+WRITE_EVERY=1,deepum+CORR_SETS=131072,deepum+OBSERVE_US=20 \
  --deadline 390 --timeout 150 --warmup 5 --iterations 2 --out $OUT/r > $OUT/r/bench.log 2>&1
echo "bench rc=$?"
grep -v "^wrote" $OUT/r/bench.log | tail -30
cd $OUT/r && for f in engine-*.log; do gzip -1 $f; done; ls -la
