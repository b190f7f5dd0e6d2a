. out/prep.sh
mkdir -p $OUT/r
timeout 150 python3 scripts/bench_train --smoke --runs deepum,deepum-writer,demand --out $OUT/r/smoke 2>&1 | grep -v "^wrote" | tail -12
(cd $OUT && tar czf results.tgz r)
for m in "resnet50 95" "bert 100"; do set -- $m
  mkdir -p $OUT/r/logs-$1
  DEEPUM_ENGINE_LOG=$OUT/r/logs-$1/engine-%p.log timeout $(($2 + 45)) python3 scripts/bench_train $1 --budgets 0.5 \
     --runs deepum,deepum-writer --deadline $2 --timeout 60 --out $OUT/r/logs-$1 2>&1 | grep -v "^wrote" | tail -6
  ls -tr $OUT/r/logs-$1/engine-*.log | cat > $OUT/r/logs-$1/order.txt
  gzip $OUT/r/logs-$1/engine-*.log
  (cd $OUT && tar czf results.tgz r)
done
(cd $OUT && tar czf results.tgz r && rm -rf r)
