# call 1 (seventeenth session): issue 6's 75% cells with runs of uses; and a position write per launch
. out/prep.sh
for m in "resnet50 120" "bert 140" "gpt2 170"; do set -- $m
  timeout $(($2+15)) python3 scripts/bench_train $1 --budgets 0.75 --runs deepum,demand,deepum+WRITE_EVERY=1 \
    --deadline $2 --timeout 60 --warmup 3 --settle 15 --iterations 3 --out $OUT/$1 > $OUT/$1.log 2>&1
  grep -v "^wrote" $OUT/$1.log | tail -8
done
cd $OUT && tar czf table75.tgz resnet50 bert gpt2 *.log && rm -rf resnet50 bert gpt2 && ls -la
