# call 6 (eighteenth session): GPT-2 at 75%, the engine with and without forgetting, two tries each, alternating, engine logs (the one clear loss of call 5)
. out/prep.sh
mkdir -p $OUT/logs
DEEPUM_ENGINE_LOG=$OUT/logs/engine-%p.log timeout 175 python3 scripts/bench_train gpt2 --budgets 0.75 --runs deepum,deepum+FORGET_UNSETTLED=1 --repeat 2 \
  --deadline 150 --timeout 60 --warmup 3 --settle 15 --iterations 3 --out $OUT/gpt2-0.75 > $OUT/gpt2-0.75.log 2>&1
grep -v "^wrote" $OUT/gpt2-0.75.log | tail -7
cd $OUT && for f in logs/*.log; do gzip -1 $f; done
tar czf forget-call6.tgz gpt2-0.75 *.log && tar cf logs.tar logs && rm -rf gpt2-0.75 logs && ls -la
