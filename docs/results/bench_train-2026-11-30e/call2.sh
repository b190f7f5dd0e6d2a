. out/prep.sh
mkdir -p $OUT/r
R=deepum,deepum-history,deepum-observer
timeout 290 python3 scripts/bench_train gpt2 --budgets 0.5,0.75 --runs $R --deadline 250 --timeout 60 --out $OUT/r/victims-gpt2 2>&1 | tee $OUT/r/victims-gpt2.console.log
timeout 230 python3 scripts/bench_train bert --budgets 0.5,0.75 --runs $R --deadline 190 --timeout 60 --out $OUT/r/victims-bert 2>&1 | tee $OUT/r/victims-bert.console.log
cd $OUT && tar czf results.tgz r && rm -rf r
