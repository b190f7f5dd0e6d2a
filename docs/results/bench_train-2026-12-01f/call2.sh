# call 2 (nineteenth session): pending_measurements tries-75-gpt2 (GPT-2 at 75%, engine and demand, three tries each, alternating, settled)
. out/prep.sh
timeout 560 python3 scripts/gpu/pending_measurements tries-75-gpt2 --out $OUT/w > /dev/null 2>&1
grep -v "^wrote" $OUT/w/tries-75-gpt2.log | tail -14
cd $OUT/w && tar czf ../tries-75-gpt2.tgz . && cd .. && rm -rf w && ls -la
