# call 1 (twentieth session): pending_measurements marks-50-small (ResNet-50 and BERT at 50%, engine and demand, two tries each, alternating, settled, each step timed from its mark)
. out/prep.sh
timeout 560 python3 scripts/gpu/pending_measurements marks-50-small --out $OUT/w > $OUT/call1.log 2>&1
grep -v "^wrote" $OUT/call1.log | tail -30
cd $OUT/w && tar czf ../marks-50-small.tgz . && cd .. && rm -rf w && ls -la
