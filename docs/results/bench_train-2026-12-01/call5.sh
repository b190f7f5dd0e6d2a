# call 5 (fourteenth session): GPT-2 124M and BERT at 50%, engine and demand, warmed up until settled
. out/prep.sh
mkdir -p $OUT/gpt2 $OUT/bert
for m in gpt2 bert; do
  timeout 92 python3 scripts/bench_train $m --budgets 0.5 --runs deepum,demand --deadline 88 --timeout 60 \
    --warmup 3 --settle 15 --iterations 3 --out $OUT/$m > $OUT/$m/bench.log 2>&1
  echo "$m rc=$?"; grep -v "^wrote" $OUT/$m/bench.log | tail -7
done
cd $OUT && tar czf results.tgz gpt2 bert && rm -rf gpt2 bert
