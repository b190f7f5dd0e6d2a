. out/prep.sh
mkdir -p $OUT/r
python3 scripts/gpu/pending_measurements xl-corr-sets --out $OUT/r &
pid=$!
while kill -0 $pid 2>/dev/null; do sleep 20; (cd $OUT && tar czf results.tgz r 2>/dev/null); done
wait $pid; echo "step rc=$?"
grep -v "^wrote" $OUT/r/xl-corr-sets.log | grep -v "^\$" | tail -45
(cd $OUT && tar czf results.tgz r && rm -rf r)
