# call 3 (twenty-third session): pending_measurements window-eighth (ResNet-50 and BERT at 50%, deepum against a window of an eighth of the budget, three tries a side, alternating, settled), engine logs
. out/prep.sh
mkdir -p $OUT/logs
DEEPUM_ENGINE_LOG=$OUT/logs/engine-%p.log timeout 560 python3 scripts/gpu/pending_measurements window-eighth --out $OUT/w > $OUT/call3.log 2>&1
grep -v "^wrote" $OUT/w/window-eighth.log | tail -30
gzip $OUT/logs/*.log
cd $OUT/w && tar czf ../runs-call3.tgz . && cd .. && rm -rf w && tar cf logs-call3.tar logs && rm -rf logs && ls -la
