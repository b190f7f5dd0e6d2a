# call 5 (twenty-second session): ResNet-50 at 50%, the engine with its new default (victims in address runs) against demand, two tries a side, alternating, settled, engine logs (the rest of the session's device time)
. out/prep.sh
mkdir -p $OUT/logs
DEEPUM_ENGINE_LOG=$OUT/logs/engine-%p.log timeout 200 python3 scripts/bench_train resnet50 --budgets 0.5 --runs deepum,demand --repeat 2 \
    --deadline 150 --timeout 50 --warmup 3 --settle 15 --iterations 3 --out $OUT/resnet50-0.5 > $OUT/resnet50-0.5.log 2>&1
grep -v "^wrote" $OUT/resnet50-0.5.log | tail -9
gzip $OUT/logs/*.log
cd $OUT && tar czf runs-call5.tgz resnet50-0.5* && tar cf logs-call5.tar logs && rm -rf resnet50-0.5 logs && ls -la
