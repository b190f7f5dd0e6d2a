# call 4 (eighteenth session): the engine with and without forgetting again: ResNet-50 at 50% and 75% (three tries), BERT at 75% (two), alternating
. out/prep.sh
for m in "resnet50 0.5 3 150" "resnet50 0.75 3 140" "bert 0.75 2 130"; do set -- $m
  timeout $(($4+30)) python3 scripts/bench_train $1 --budgets $2 --runs deepum,deepum+FORGET_UNSETTLED=1 --repeat $3 \
    --deadline $4 --timeout 60 --warmup 3 --settle 15 --iterations 3 --out $OUT/$1-$2 > $OUT/$1-$2.log 2>&1
  grep -v "^wrote" $OUT/$1-$2.log | tail -6
done
cd $OUT && tar czf forget-call4.tgz resnet50-* bert-* && rm -rf resnet50-0.5 resnet50-0.75 bert-0.75 && ls -la
