# call 6 (seventeenth session): ResNet-50 at 50%, the engine three times in one call (one configuration), engine logs
. out/prep.sh
export DEEPUM_ENGINE_LOG=$OUT/logs/engine-%p.log; mkdir -p $OUT/logs
timeout 150 python3 scripts/bench_train resnet50 --budgets 0.5 --runs deepum,deepum+ISSUER=1,deepum+WRITER=0 \
  --deadline 135 --timeout 60 --warmup 3 --settle 15 --iterations 3 --out $OUT/resnet50 > $OUT/resnet50.log 2>&1
grep -v "^wrote" $OUT/resnet50.log | tail -6
cd $OUT && for f in logs/*.log; do gzip -1 $f; done
tar czf thrice.tgz resnet50 resnet50.log && tar cf logs.tar logs && rm -rf resnet50 logs && ls -la
