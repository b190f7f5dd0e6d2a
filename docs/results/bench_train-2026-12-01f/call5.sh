# call 5 (nineteenth session): ResNet-50's per-launch trace again, after 8 warm-up iterations (call 4: its exec IDs settle to ~45 new per iteration only then under the tracer)
. out/prep.sh
timeout 400 python3 scripts/gpu/capture_traces.py --out $OUT/r --iterations 5 --warmup 8 --timeout 380 --faults uvm-tools --per-launch resnet50 > $OUT/capture.log 2>&1
tail -4 $OUT/capture.log
python3 -c "import json,glob; d=json.load(open(glob.glob('$OUT/r/*.json')[0])); print('\n'.join(d['tracer_summary'][:4])); print(d['wall_s'], d['run']['iteration_s'])"
ls -la $OUT/r
