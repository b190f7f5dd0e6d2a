# call 4 (twenty-second session): pending_measurements victim-runs-75 (BERT and GPT-2 at 75%, deepum against deepum+VICTIM_RUNS=1, three tries a side for BERT, two for GPT-2, alternating, settled), engine logs
. out/prep.sh
mkdir -p $OUT/logs
DEEPUM_ENGINE_LOG=$OUT/logs/engine-%p.log timeout 560 python3 scripts/gpu/pending_measurements victim-runs-75 --out $OUT/w > $OUT/call4.log 2>&1
grep -v "^wrote" $OUT/w/victim-runs-75.log | tail -30
gzip $OUT/logs/*.log
cd $OUT/w && tar czf ../runs-call4.tgz . && cd .. && rm -rf w && tar cf logs-call4.tar logs && rm -rf logs && ls -la
