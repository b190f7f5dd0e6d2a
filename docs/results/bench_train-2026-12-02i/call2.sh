# call 2 (twenty-third session): pending_measurements forget-50 (ResNet-50 and BERT at 50%, deepum against deepum+FORGET_UNSETTLED=1, three tries a side, alternating, settled), engine logs
. out/prep.sh
mkdir -p $OUT/logs
DEEPUM_ENGINE_LOG=$OUT/logs/engine-%p.log timeout 560 python3 scripts/gpu/pending_measurements forget-50 --out $OUT/w > $OUT/call2.log 2>&1
grep -v "^wrote" $OUT/w/forget-50.log | tail -30
gzip $OUT/logs/*.log
cd $OUT/w && tar czf ../runs-call2.tgz . && cd .. && rm -rf w && tar cf logs-call2.tar logs && rm -rf logs && ls -la
