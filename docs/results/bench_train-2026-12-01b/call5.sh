# call 5 (fifteenth session): do a write-back and a prefetch run at the same time? (calibrate's new
# both-directions group); then GPT-2 XL at 75% again, the writer first this time
. out/prep.sh
start=$(date +%s)
timeout 150 python3 scripts/calibrate --only both-directions,bulk-prefetch-and-eviction -o $OUT/both-directions.json > $OUT/calibrate.log 2>&1
echo "calibrate rc=$?"; tail -30 $OUT/calibrate.log
left=$((555 - ($(date +%s) - start)))
echo "left ${left} s"
if [ $left -gt 260 ]; then
  mkdir -p $OUT/r
  timeout $((left - 5)) python3 scripts/bench_train gpt2-xl --budgets 0.75 --runs deepum-writer,deepum \
    --deadline $((left - 10)) --timeout 250 --warmup 3 --settle 20 --iterations 3 --out $OUT/r > $OUT/r/bench.log 2>&1
  echo "bench rc=$?"; grep -v "^wrote" $OUT/r/bench.log | tail -8
  cd $OUT && tar czf xl-writer-again.tgz r && rm -rf r
fi
ls -la $OUT
