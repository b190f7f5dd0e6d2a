# call 4 (sixteenth session): issue 6's 50% cells of the small models with history as runs of uses, engine against demand
. out/prep.sh
for m in "resnet50 110" "bert 130" "gpt2 170"; do set -- $m
  timeout $(($2+15)) python3 scripts/bench_train $1 --budgets 0.5 --runs deepum,demand --deadline $2 --timeout 60 \
    --warmup 3 --settle 15 --iterations 3 --out $OUT/$1 > $OUT/$1.log 2>&1
  grep -v "^wrote" $OUT/$1.log | tail -6
done
cd $OUT && tar czf table.tgz resnet50 bert gpt2 *.log && rm -rf resnet50 bert gpt2 && ls -la
