# call 3 (eighteenth session): ResNet-50 at 75% with engine logs (why forgetting lost there), then GPT-2 at 50%, two tries each, alternating
. out/prep.sh
mkdir -p $OUT/logs
DEEPUM_ENGINE_LOG=$OUT/logs/engine-%p.log timeout 160 python3 scripts/bench_train resnet50 --budgets 0.75 --runs deepum,deepum+FORGET_UNSETTLED=1 --repeat 2 \
  --deadline 130 --timeout 60 --warmup 3 --settle 15 --iterations 3 --out $OUT/resnet50 > $OUT/resnet50.log 2>&1
grep -v "^wrote" $OUT/resnet50.log | tail -6
timeout 380 python3 scripts/bench_train gpt2 --budgets 0.5 --runs deepum,deepum+FORGET_UNSETTLED=1,demand --repeat 2 \
  --deadline 350 --timeout 90 --warmup 3 --settle 15 --iterations 3 --out $OUT/gpt2 > $OUT/gpt2.log 2>&1
grep -v "^wrote" $OUT/gpt2.log | tail -11
cd $OUT && for f in logs/*.log; do gzip -1 $f; done
tar czf forget-call3.tgz resnet50 gpt2 *.log && tar cf logs.tar logs && rm -rf resnet50 gpt2 logs && ls -la
