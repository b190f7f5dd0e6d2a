# call 2 (fourteenth session): do the tables catch up? 20 iterations: GPT-2 XL at 75% (default and a 4x
# correlation table, engine logs), then GPT-2 124M at 50% (engine and demand)
. out/prep.sh
mkdir -p $OUT/xl $OUT/gpt2
DEEPUM_ENGINE_LOG=$OUT/xl/engine-%p.log timeout 400 python3 scripts/bench_train gpt2-xl --budgets 0.75 \
  --runs deepum,deepum+CORR_SETS=131072 --deadline 230 --timeout 190 --warmup 17 --iterations 3 --out $OUT/xl > $OUT/xl/bench.log 2>&1
echo "xl rc=$?"
grep -v "^wrote" $OUT/xl/bench.log | tail -8
timeout 150 python3 scripts/bench_train gpt2 --budgets 0.5 --runs deepum,demand --deadline 75 --timeout 70 --warmup 20 --iterations 3 --out $OUT/gpt2 > $OUT/gpt2/bench.log 2>&1
echo "gpt2 rc=$?"
grep -v "^wrote" $OUT/gpt2/bench.log | tail -8
(cd $OUT/xl && for f in engine-*.log; do gzip -1 $f; done; tar czf stats.tgz *.stats.json && rm -f *.stats.json; ls -la)
(cd $OUT/gpt2 && tar czf stats.tgz *.stats.json && rm -f *.stats.json)
