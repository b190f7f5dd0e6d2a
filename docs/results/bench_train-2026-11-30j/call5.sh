. out/prep.sh
mkdir -p $OUT/r
(python3 scripts/bench_train gpt2-xl --budgets 0.5 --runs deepum --deadline 230 --timeout 200 --warmup 3 --iterations 3 --out $OUT/r/xl > $OUT/r/xl.log 2>&1;
 python3 scripts/bench_train bert --budgets 0.5 --runs deepum --deadline 70 --timeout 50 --out $OUT/r/bert > $OUT/r/bert.log 2>&1) &
pid=$!
while kill -0 $pid 2>/dev/null; do sleep 20; (cd $OUT && tar czf results.tgz r 2>/dev/null); done
wait $pid
grep -v "^wrote" $OUT/r/xl.log | tail -8; grep -v "^wrote" $OUT/r/bert.log | tail -8
(cd $OUT && tar czf results.tgz r && rm -rf r)
