# call 4 (twenty-third session): ResNet-50 and BERT at 50%, the engine (victims in address runs) against forgetting (DEEPUM_FORGET_UNSETTLED=1) and demand, two tries each, alternating, settled, engine logs (the rest of the session's device time)
. out/prep.sh
mkdir -p $OUT/logs $OUT/w
for m in "resnet50 200" "bert 260"; do set -- $m
DEEPUM_ENGINE_LOG=$OUT/logs/engine-%p.log timeout 300 python3 scripts/bench_train $1 --budgets 0.5 --runs deepum,deepum+FORGET_UNSETTLED=1,demand --repeat 2 \
    --deadline $2 --timeout 60 --warmup 3 --settle 15 --iterations 3 --out $OUT/w/$1-0.5 > $OUT/w/$1-0.5.log 2>&1
grep -v "^wrote" $OUT/w/$1-0.5.log | tail -12
done
gzip $OUT/logs/*.log
cd $OUT/w && tar czf ../runs-call4.tgz . && cd .. && rm -rf w && tar cf logs-call4.tar logs && rm -rf logs && ls -la
