# call 1 (twenty-second session): pending_measurements victim-runs (ResNet-50 and BERT at 50%, deepum against deepum+VICTIM_RUNS=1, three tries a side, alternating, settled), engine logs
. out/prep.sh
mkdir -p $OUT/logs
DEEPUM_ENGINE_LOG=$OUT/logs/engine-%p.log timeout 560 python3 scripts/gpu/pending_measurements victim-runs --out $OUT/w > $OUT/call1.log 2>&1
grep -v "^wrote" $OUT/call1.log | tail -30
gzip $OUT/logs/*.log
cd $OUT/w && tar czf ../runs-call1.tgz . && cd .. && rm -rf w && tar cf logs-call1.tar logs && rm -rf logs && ls -la
