# call 3 (twenty-second session): pending_measurements victim-runs-again (GPT-2 and BERT at 50%, deepum against deepum+VICTIM_RUNS=1, three tries a side, alternating, settled), engine logs
. out/prep.sh
mkdir -p $OUT/logs
DEEPUM_ENGINE_LOG=$OUT/logs/engine-%p.log timeout 560 python3 scripts/gpu/pending_measurements victim-runs-again --out $OUT/w > $OUT/call3.log 2>&1
grep -v "^wrote" $OUT/w/victim-runs-again.log | tail -30
gzip $OUT/logs/*.log
cd $OUT/w && tar czf ../runs-call3.tgz . && cd .. && rm -rf w && tar cf logs-call3.tar logs && rm -rf logs && ls -la
