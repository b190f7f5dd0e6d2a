# call 1 (eighteenth session): ResNet-50 at 50%, the engine with and without forgetting the unsettled iterations, and demand, three tries each, alternating, engine logs
. out/prep.sh
export DEEPUM_ENGINE_LOG=$OUT/logs/engine-%p.log; mkdir -p $OUT/logs
timeout 470 python3 scripts/bench_train resnet50 --budgets 0.5 --runs deepum,deepum+FORGET_UNSETTLED=1,demand --repeat 3 \
  --deadline 440 --timeout 60 --warmup 3 --settle 15 --iterations 3 --out $OUT/resnet50 > $OUT/resnet50.log 2>&1
grep -v "^wrote" $OUT/resnet50.log | tail -14
cd $OUT && for f in logs/*.log; do gzip -1 $f; done
tar czf forget50.tgz resnet50 resnet50.log && tar cf logs.tar logs && rm -rf resnet50 logs && ls -la
