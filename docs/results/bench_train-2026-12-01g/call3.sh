# call 3 (twentieth session): pending_measurements tries-75-small again, now that bench_train times each step from its mark (ResNet-50 and BERT at 75%, engine and demand, three tries each, alternating, settled)
. out/prep.sh
timeout 570 python3 scripts/gpu/pending_measurements tries-75-small --out $OUT/w > $OUT/call3.log 2>&1
grep -v "^wrote" $OUT/call3.log | tail -30
cd $OUT/w && tar czf ../tries-75-small.tgz . && cd .. && rm -rf w && ls -la
