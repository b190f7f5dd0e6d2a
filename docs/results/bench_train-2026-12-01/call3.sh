# call 3 (fourteenth session): GPT-2 XL at 50%, engine and demand, each warmed up until settled (bench_train --settle)
. out/prep.sh
mkdir -p $OUT/r
DEEPUM_ENGINE_LOG=$OUT/r/engine-%p.log timeout 575 python3 scripts/bench_train gpt2-xl --budgets 0.5 \
  --runs deepum,demand --deadline 480 --timeout 300 --warmup 3 --settle 20 --iterations 3 --out $OUT/r > $OUT/r/bench.log 2>&1
echo "bench rc=$?"
grep -v "^wrote" $OUT/r/bench.log | tail -12
cd $OUT/r && for f in engine-*.log; do gzip -1 $f; done; tar czf results.tgz *.json *.png bench.log && rm -f *.json *.png; ls -la
