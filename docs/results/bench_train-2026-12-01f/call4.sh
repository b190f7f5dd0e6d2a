# call 4 (nineteenth session): why ResNet-50's traces churn exec IDs (~24% new per iteration) where bench_train's runs settle (~4%): access-set captures with today's defaults, after 1 and after 8 warm-up iterations
. out/prep.sh
for w in 1 8; do
  timeout 200 python3 scripts/gpu/capture_traces.py --out $OUT/w$w --iterations 5 --warmup $w --timeout 170 --faults uvm-tools resnet50 > $OUT/capture-w$w.log 2>&1
  tail -3 $OUT/capture-w$w.log
  python3 -c "import json,glob; d=json.load(open(glob.glob('$OUT/w$w/*.json')[0])); print('\n'.join(d['tracer_summary'][:4])); print(d['run']['losses'])"
done
cd $OUT && tar czf captures-call4.tgz w1 w8 capture-w*.log && rm -rf w1 w8 && ls -la
