. out/prep.sh
mkdir -p $OUT/r
R=deepum-history,deepum,demand
timeout 300 python3 scripts/bench_train gpt2 --budgets 0.5,0.75 --runs $R --deadline 255 --timeout 60 --out $OUT/r/defaults-gpt2 2>&1 | tee $OUT/r/defaults-gpt2.console.log
timeout 200 python3 scripts/bench_train resnet50 --budgets 0.5,0.75 --runs $R --deadline 160 --timeout 60 --out $OUT/r/defaults-resnet50 2>&1 | tee $OUT/r/defaults-resnet50.console.log
cd $OUT && tar czf results.tgz r && rm -rf r
