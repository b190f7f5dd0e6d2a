. out/prep.sh
mkdir -p $OUT/r
( python3 scripts/gpu/pending_measurements gpt2-xl --out $OUT/r; echo "gpt2-xl rc=$?";
  python3 scripts/gpu/pending_measurements gpt2-xl-75 --out $OUT/r; echo "gpt2-xl-75 rc=$?" ) &
pid=$!
while kill -0 $pid 2>/dev/null; do sleep 20; (cd $OUT && tar czf results.tgz r 2>/dev/null); done
wait $pid
for f in $OUT/r/*.log; do echo "== $f"; grep -v "^wrote" $f | grep -v "^\$" | tail -25; done
(cd $OUT && tar czf results.tgz r && rm -rf r)
