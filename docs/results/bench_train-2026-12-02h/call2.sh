# call 2 (twenty-second session): pending_measurements victim-runs-gpt2 (GPT-2 at 50%, deepum against deepum+VICTIM_RUNS=1, two tries a side, alternating, settled), engine logs
. out/prep.sh
mkdir -p $OUT/logs
DEEPUM_ENGINE_LOG=$OUT/logs/engine-%p.log timeout 560 python3 scripts/gpu/pending_measurements victim-runs-gpt2 --out $OUT/w > $OUT/call2.log 2>&1
grep -v "^wrote" $OUT/call2.log | tail -30
gzip $OUT/logs/*.log
cd $OUT/w && tar czf ../runs-call2.tgz . && cd .. && rm -rf w && tar cf logs-call2.tar logs && rm -rf logs && ls -la
