. out/prep.sh
mkdir -p $OUT/r/history-log-gpt2
DEEPUM_ENGINE_LOG=$OUT/r/history-log-gpt2/engine-%p.log timeout 130 python3 scripts/bench_train gpt2 --budgets 0.5 --runs deepum --deadline 100 --timeout 60 --out $OUT/r/history-log-gpt2 2>&1 | tee $OUT/r/history-log-gpt2.console.log
cd $OUT && tar czf results.tgz r && rm -rf r
