. out/prep.sh
python3 scripts/gpu/pending_measurements same-kernels --out $OUT/r &
pid=$!
while kill -0 $pid 2>/dev/null; do sleep 20; (cd $OUT && tar czf results.tgz r 2>/dev/null); done
wait $pid; echo "step rc=$?"
grep -v "^wrote" $OUT/r/same-kernels.log | tail -40
(cd $OUT && tar czf results.tgz r && rm -rf r)
