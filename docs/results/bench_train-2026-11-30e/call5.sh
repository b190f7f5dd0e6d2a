. out/prep.sh
mkdir -p $OUT/r
timeout 175 python3 scripts/bench_train bert --budgets 0.5,0.75 --runs deepum,deepum-lrm,demand --deadline 140 --timeout 60 --out $OUT/r/defaults-bert 2>&1 | tee $OUT/r/defaults-bert.console.log
mkdir -p $OUT/r/history-log-gpt2
DEEPUM_ENGINE_LOG=$OUT/r/history-log-gpt2/engine-%p.log timeout 75 python3 scripts/bench_train gpt2 --budgets 0.5 --runs deepum --deadline 20 --timeout 60 --out $OUT/r/history-log-gpt2 2>&1 | tee $OUT/r/history-log-gpt2.console.log
timeout 110 python3 scripts/bench_train resnet50 --budgets 0.5,0.75 --runs deepum,deepum-no-issuer --deadline 80 --timeout 60 --out $OUT/r/issuer-resnet50 2>&1 | tee $OUT/r/issuer-resnet50.console.log
cd $OUT && tar czf results.tgz r && rm -rf r
