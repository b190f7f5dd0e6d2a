# call 5 (twentieth session): victims in address runs (DEEPUM_VICTIM_RUNS=1, API 1.7) against the plain engine: ResNet-50 at 75% and 50% (three tries a side, engine logs), GPT-2 at 75% (two), alternating, settled
. out/prep.sh
mkdir -p $OUT/logs
for m in "resnet50 0.75 3 130 1" "resnet50 0.5 3 140 1" "gpt2 0.75 2 150 0"; do set -- $m
  if [ $5 = 1 ]; then export DEEPUM_ENGINE_LOG=$OUT/logs/engine-%p.log; else unset DEEPUM_ENGINE_LOG; fi
  timeout $(($4+45)) python3 scripts/bench_train $1 --budgets $2 --runs deepum,deepum+VICTIM_RUNS=1 --repeat $3 \
    --deadline $4 --timeout 60 --warmup 3 --settle 15 --iterations 3 --out $OUT/$1-$2 > $OUT/$1-$2.log 2>&1
  grep -v "^wrote" $OUT/$1-$2.log | tail -7
done
gzip $OUT/logs/*.log
cd $OUT && tar czf runs-call5.tgz resnet50-* gpt2-* && tar cf logs-call5.tar logs && rm -rf resnet50-0.* gpt2-0.* logs && ls -la
