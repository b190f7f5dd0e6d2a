. out/prep.sh
mkdir -p $OUT/r
R=deepum-history,deepum,demand
timeout 240 python3 scripts/bench_train bert --budgets 0.5,0.75 --runs $R --deadline 200 --timeout 60 --out $OUT/r/defaults-bert 2>&1 | tee $OUT/r/defaults-bert.console.log
cd $OUT && tar czf results.tgz r && rm -rf r
