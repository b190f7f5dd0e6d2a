# call 2 (eighteenth session): BERT at 50% and ResNet-50 at 75%, the engine with and without forgetting, and demand, three tries each, alternating
. out/prep.sh
for m in "bert 0.5 300" "resnet50 0.75 200"; do set -- $m
  timeout $(($3+30)) python3 scripts/bench_train $1 --budgets $2 --runs deepum,deepum+FORGET_UNSETTLED=1,demand --repeat 3 \
    --deadline $3 --timeout 60 --warmup 3 --settle 15 --iterations 3 --out $OUT/$1 > $OUT/$1.log 2>&1
  grep -v "^wrote" $OUT/$1.log | tail -13
done
cd $OUT && tar czf forget-call2.tgz bert resnet50 *.log && rm -rf bert resnet50 && ls -la
