. out/prep.sh
mkdir -p $OUT/r
timeout 240 python3 scripts/calibrate -o $OUT/r/h200.json 2>&1 | tee $OUT/r/calibrate.console.log
R=deepum,deepum+EVICT_THREADS=4,demand
timeout 170 python3 scripts/bench_train gpt2 --budgets 0.5 --runs $R --deadline 150 --timeout 60 --out $OUT/r/evict-threads-gpt2 2>&1 | tee $OUT/r/evict-threads-gpt2.console.log
timeout 150 python3 scripts/bench_train resnet50 --budgets 0.5 --runs $R --deadline 120 --timeout 60 --out $OUT/r/evict-threads-resnet50 2>&1 | tee $OUT/r/evict-threads-resnet50.console.log
cd $OUT && tar czf results.tgz r && rm -rf r
