. out/prep.sh
python3 scripts/gpu/capture_traces.py --out $OUT/r --iterations 4 --warmup 1 --timeout 430 --faults uvm-tools --per-launch gpt2-xl > $OUT/r-capture.log 2>&1 &
pid=$!
mkdir -p $OUT/r
while kill -0 $pid 2>/dev/null; do sleep 20; ls $OUT/r/.capture-*/deepum-trace-*/ -la 2>/dev/null | tail -2; (cd $OUT && tar czf results.tgz --exclude='.capture-*' r r-capture.log 2>/dev/null); done
wait $pid; echo "capture rc=$?"
cat $OUT/r-capture.log | tail -30
(cd $OUT && tar czf results.tgz --exclude='.capture-*' r r-capture.log && rm -rf r)
ls -la $OUT
