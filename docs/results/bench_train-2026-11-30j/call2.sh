. out/prep.sh
mkdir -p $OUT/r
python3 scripts/gpu/pending_measurements gpt2-xl --out $OUT/r &
pid=$!
while kill -0 $pid 2>/dev/null; do sleep 20; (cd $OUT && tar czf results.tgz r 2>/dev/null); done
wait $pid; echo "step rc=$?"
grep -v "^wrote" $OUT/r/gpt2-xl.log | tail -12
# the copied-in tensor before the sweep (the library of the commit before) and the GPU test after it
DEEPUM_LIB=$PWD/out/before/libdeepum.so DEEPUM_ENGINE_LOG=$OUT/r/copied-before.log timeout 120 \
  python3 -c "from pydeepum.cli import cli; cli()" run --mode demand --capacity 256M --stats $OUT/r/copied-before-stats.json -- \
  python3 tests/gpu/copied_check.py 512 4 > $OUT/r/copied-before.json; echo "before rc=$?"; cat $OUT/r/copied-before.json
timeout 150 python3 -m pytest -m gpu tests/gpu/test_engine_gpu.py -v -k copied -p no:cacheprovider 2>&1 | tail -25
(cd $OUT && tar czf results.tgz r && rm -rf r)
