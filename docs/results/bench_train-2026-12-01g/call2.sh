# call 2 (twentieth session): pending_measurements marks-50-gpt2, then a 5-iteration ResNet-50 capture after one warm-up (does dropping each step's loss settle its exec IDs from the second iteration?)
. out/prep.sh
timeout 330 python3 scripts/gpu/pending_measurements marks-50-gpt2 --out $OUT/w > $OUT/call2.log 2>&1
grep -v "^wrote" $OUT/call2.log | tail -14
timeout 150 python3 scripts/gpu/capture_traces.py --out $OUT/cap --iterations 5 --warmup 1 --faults uvm-tools resnet50 > $OUT/capture.log 2>&1
tail -5 $OUT/capture.log
for t in $OUT/cap/*.dut*; do python3 -c "from pydeepum.cli import cli; cli()" trace info "$t" 2>&1 | tail -12; done
cd $OUT/w && tar czf ../marks-50-gpt2.tgz . && cd .. && rm -rf w && tar czf cap.tgz cap && rm -rf cap && ls -la
