# call 3: the whole-budget scan settled (five warm-up iterations); then GPT-2 XL at 75% with an engine log, settled too
. out/prep.sh
mkdir -p $OUT/r1 $OUT/r2
( python3 scripts/gpu/pending_measurements history-scan-settled --out $OUT/r1; echo "settled rc=$?";
  DEEPUM_ENGINE_LOG=$OUT/r2/xl75/engine-%p.log python3 scripts/bench_train gpt2-xl --budgets 0.75 --runs deepum --deadline 200 --timeout 200 --warmup 5 --iterations 2 --out $OUT/r2/xl75 > $OUT/r2/xl75.log 2>&1; echo "log run rc=$?" ) &
pid=$!
while kill -0 $pid 2>/dev/null; do sleep 20; (cd $OUT && tar czf r1.tgz r1 2>/dev/null); done
wait $pid
grep -v "^wrote" $OUT/r1/history-scan-settled.log | grep -v "^\$" | tail -14
grep -v "^wrote" $OUT/r2/xl75.log | tail -8
python3 scripts/engine_log_report $OUT/r2/xl75/engine-*.log* --from-iteration 5 > $OUT/r2/report.txt 2>&1; tail -60 $OUT/r2/report.txt
(cd $OUT && tar czf r1.tgz r1 && tar czf r2.tgz r2 && rm -rf r1 r2)
