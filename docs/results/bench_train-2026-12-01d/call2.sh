# call 2 (seventeenth session): a position write per launch against every 8th, alternating, at 50%
. out/prep.sh
R=deepum,deepum+WRITE_EVERY=1,deepum+ISSUER=1,deepum+ISSUER=1+WRITE_EVERY=1
for m in "resnet50 115" "bert 135" "gpt2 175"; do set -- $m
  timeout $(($2+15)) python3 scripts/bench_train $1 --budgets 0.5 --runs $R \
    --deadline $2 --timeout 60 --warmup 3 --settle 15 --iterations 3 --out $OUT/$1 > $OUT/$1.log 2>&1
  grep -v "^wrote" $OUT/$1.log | tail -7
done
cd $OUT && tar czf write50.tgz resnet50 bert gpt2 *.log && rm -rf resnet50 bert gpt2 && ls -la
