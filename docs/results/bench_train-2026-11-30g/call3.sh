. out/prep.sh
mkdir -p $OUT/r
for m in "gpt2 150" "bert 100" "resnet50 95"; do set -- $m
  timeout $(($2 + 45)) python3 scripts/bench_train $1 --budgets 0.75 --runs deepum,deepum-writer,deepum+LOOKAHEAD_BLOCKS=1024 \
     --deadline $2 --timeout 60 --out $OUT/r/s8-75 2>&1 | grep -v "^wrote" | tail -7
  (cd $OUT && tar czf results.tgz r)
done
timeout 150 python3 scripts/bench_train gpt2 --budgets 0.5 --runs deepum,deepum+LOOKAHEAD_BLOCKS=1024 \
     --deadline 105 --timeout 60 --out $OUT/r/s8-window-gpt2-50 2>&1 | grep -v "^wrote" | tail -7
(cd $OUT && tar czf results.tgz r && rm -rf r)
