. out/prep.sh
python3 scripts/gpu/pending_measurements writer-repeats --out $OUT/r &
pid=$!
while kill -0 $pid 2>/dev/null; do sleep 20; (cd $OUT && tar czf results.tgz r 2>/dev/null); done
wait $pid; echo "step rc=$?"; ls -la $OUT/r/writer-repeats | head -20
grep -v "^wrote" $OUT/r/writer-repeats.log | tail -40
(cd $OUT && tar czf results.tgz r && rm -rf r)
