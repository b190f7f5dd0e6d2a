# call 1 (twenty-third session): pending_measurements cold-traces (per-launch traces of ResNet-50 and BERT from their first iteration), engine logs
. out/prep.sh
mkdir -p $OUT/logs
DEEPUM_ENGINE_LOG=$OUT/logs/engine-%p.log timeout 560 python3 scripts/gpu/pending_measurements cold-traces --out $OUT/w > $OUT/call1.log 2>&1
grep -v "^wrote" $OUT/w/cold-traces.log | tail -30
gzip $OUT/logs/*.log
cd $OUT/w && tar czf ../runs-call1.tgz . && cd .. && rm -rf w && tar cf logs-call1.tar logs && rm -rf logs && ls -la
