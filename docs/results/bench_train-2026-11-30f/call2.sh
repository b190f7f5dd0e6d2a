. out/prep.sh
mkdir -p $OUT/r
date
timeout 330 python3 scripts/gpu/capture_traces.py gpt2 --per-launch --faults uvm-tools --iterations 5 --timeout 320 --out $OUT/r 2>&1 | tail -20
date
timeout 60 python3 scripts/gpu/profile_resident.py bert $OUT/r 2>&1 | tail -5
date
timeout 170 python3 scripts/gpu/capture_traces.py bert --per-launch --faults uvm-tools --iterations 5 --timeout 160 --out $OUT/r 2>&1 | tail -20
date
cd $OUT && tar czf results.tgz r && rm -rf r
