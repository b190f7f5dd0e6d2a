# call 5 (seventeenth session): ResNet-50 and BERT at 50%, the engine and demand twice each, alternating (spread within one call)
. out/prep.sh
R=deepum,demand,deepum+ISSUER=1,demand+ISSUER=1
for m in "resnet50 150" "bert 170"; do set -- $m
  timeout $(($2+15)) python3 scripts/bench_train $1 --budgets 0.5 --runs $R \
    --deadline $2 --timeout 60 --warmup 3 --settle 15 --iterations 3 --out $OUT/$1 > $OUT/$1.log 2>&1
  grep -v "^wrote" $OUT/$1.log | tail -7
done
cd $OUT && tar czf twice50.tgz resnet50 bert *.log && rm -rf resnet50 bert && ls -la
