. out/prep.sh
python3 scripts/gpu/pending_measurements history-logs --out $OUT/r &
pid=$!
while kill -0 $pid 2>/dev/null; do sleep 20; (cd $OUT && tar czf results.tgz r 2>/dev/null); done
wait $pid; echo "step rc=$?"; gzip -f $OUT/r/history-logs/*.log; ls -la $OUT/r/history-logs | head -20
grep -v "^wrote" $OUT/r/history-logs.log | tail -40
(cd $OUT && tar czf results.tgz r && rm -rf r)
