. out/prep.sh
python3 scripts/gpu/pending_measurements gpt2-logs --out $OUT/r &
pid=$!
while kill -0 $pid 2>/dev/null; do sleep 20; (cd $OUT && tar czf results.tgz r 2>/dev/null); done
wait $pid; echo "step rc=$?"
grep -v "^wrote" $OUT/r/gpt2-logs.log | tail -40
(cd $OUT && tar czf results.tgz r && rm -rf r)
