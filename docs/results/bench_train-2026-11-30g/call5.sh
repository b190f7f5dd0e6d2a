. out/prep.sh
mkdir -p $OUT/r
for m in "resnet50 0.5,0.75 100" "bert 0.5,0.75 110" "gpt2 0.5 105"; do set -- $m
  timeout $(($3 + 45)) python3 scripts/bench_train $1 --budgets $2 --runs deepum,demand \
     --deadline $3 --timeout 60 --out $OUT/r/nondet 2>&1 | grep -v "^wrote" | tail -9
  (cd $OUT && tar czf results.tgz r)
done
(cd $OUT && tar czf results.tgz r && rm -rf r)
