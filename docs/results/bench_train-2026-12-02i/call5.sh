# call 5 (twenty-third session): GPT-2 at 50%, the engine against forgetting (DEEPUM_FORGET_UNSETTLED=1), up to two tries each as the deadline allows, alternating, settled, engine logs (the rest of the session's device time)
. out/prep.sh
mkdir -p $OUT/logs $OUT/w
DEEPUM_ENGINE_LOG=$OUT/logs/engine-%p.log timeout 290 python3 scripts/bench_train gpt2 --budgets 0.5 --runs deepum,deepum+FORGET_UNSETTLED=1 --repeat 2 \
    --deadline 215 --timeout 70 --warmup 3 --settle 15 --iterations 3 --out $OUT/w/gpt2-0.5 > $OUT/w/gpt2-0.5.log 2>&1
grep -v "^wrote" $OUT/w/gpt2-0.5.log | tail -12
gzip $OUT/logs/*.log
cd $OUT/w && tar czf ../runs-call5.tgz . && cd .. && rm -rf w && tar cf logs-call5.tar logs && rm -rf logs && ls -la
