# call 5 (eighteenth session): the engine with and without forgetting: BERT at 50% (three tries), GPT-2 at 75% (two), alternating
. out/prep.sh
for m in "bert 0.5 3 170" "gpt2 0.75 2 170"; do set -- $m
  timeout $(($4+30)) python3 scripts/bench_train $1 --budgets $2 --runs deepum,deepum+FORGET_UNSETTLED=1 --repeat $3 \
    --deadline $4 --timeout 70 --warmup 3 --settle 15 --iterations 3 --out $OUT/$1-$2 > $OUT/$1-$2.log 2>&1
  grep -v "^wrote" $OUT/$1-$2.log | tail -6
done
cd $OUT && tar czf forget-call5.tgz bert-* gpt2-* && rm -rf bert-0.5 gpt2-0.75 && ls -la
