# call 6 (twentieth session): victims in address runs against the plain engine again, ResNet-50 at 50%, three tries a side, alternating, settled, engine logs (the end of the session's device time)
. out/prep.sh
mkdir -p $OUT/logs
DEEPUM_ENGINE_LOG=$OUT/logs/engine-%p.log timeout 175 python3 scripts/bench_train resnet50 --budgets 0.5 --runs deepum,deepum+VICTIM_RUNS=1 --repeat 3 \
    --deadline 125 --timeout 50 --warmup 3 --settle 15 --iterations 3 --out $OUT/resnet50-0.5 > $OUT/resnet50-0.5.log 2>&1
grep -v "^wrote" $OUT/resnet50-0.5.log | tail -7
gzip $OUT/logs/*.log
cd $OUT && tar czf runs-call6.tgz resnet50-0.5* && tar cf logs-call6.tar logs && rm -rf resnet50-0.5 logs && ls -la
