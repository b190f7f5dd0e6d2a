# call 1 (nineteenth session): pending_measurements tries-75-small (ResNet-50 and BERT at 75%, engine and demand, three tries each, alternating, settled)
. out/prep.sh
timeout 540 python3 scripts/gpu/pending_measurements tries-75-small --out $OUT/w > $OUT/call1.log 2>&1
grep -v "^wrote" $OUT/call1.log | tail -24
cd $OUT/w && tar czf ../tries-75-small.tgz . && cd .. && rm -rf w && ls -la
