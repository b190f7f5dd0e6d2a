# call 4 (twentieth session): pending_measurements tries-75-gpt2 again, now that bench_train times each step from its mark (GPT-2 at 75%, engine and demand, three tries each, alternating, settled)
. out/prep.sh
timeout 570 python3 scripts/gpu/pending_measurements tries-75-gpt2 --out $OUT/w > $OUT/call4.log 2>&1
grep -v "^wrote" $OUT/call4.log | tail -30
cd $OUT/w && tar czf ../tries-75-gpt2.tgz . && cd .. && rm -rf w && ls -la
