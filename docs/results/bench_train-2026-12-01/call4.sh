# call 4 (fourteenth session): GPT-2 XL at 75%, engine and demand, warmed up until settled; then, if time is
# left, the engine at 50% with a 4x correlation table (at 50% the run's tables held 130k pairs of 131k ways)
. out/prep.sh
start=$(date +%s)
mkdir -p $OUT/r75 $OUT/r50
DEEPUM_ENGINE_LOG=$OUT/r75/engine-%p.log timeout 400 python3 scripts/bench_train gpt2-xl --budgets 0.75 \
  --runs deepum,demand --deadline 380 --timeout 250 --warmup 3 --settle 20 --iterations 3 --out $OUT/r75 > $OUT/r75/bench.log 2>&1
echo "bench 75 rc=$?"
grep -v "^wrote" $OUT/r75/bench.log | tail -12
left=$((560 - ($(date +%s) - start)))
echo "left ${left} s"
if [ $left -gt 220 ]; then
  timeout $((left - 10)) python3 scripts/bench_train gpt2-xl --budgets 0.5 --runs deepum+CORR_SETS=131072 \
    --deadline $((left - 15)) --timeout $((left - 15)) --warmup 3 --settle 20 --iterations 3 --out $OUT/r50 > $OUT/r50/bench.log 2>&1
  echo "bench 50 rc=$?"
  grep -v "^wrote" $OUT/r50/bench.log | tail -8
fi
cd $OUT && (cd r75 && for f in engine-*.log; do gzip -1 $f; done) && tar czf results.tgz r75/*.json r75/*.png r75/bench.log r50 && rm -rf r50 r75/*.json r75/*.png; ls -la r75
