. out/prep.sh
mkdir -p $OUT/r
date
for m in resnet50 bert; do
  timeout 90 python3 scripts/gpu/profile_resident.py $m $OUT/r 2>&1 | tail -4 || true
  [ -f $OUT/r/$m-resident.json ] || gzip -c /tmp/${m}_prof.json > $OUT/r/${m}_prof.json.gz
  date
done
timeout 330 python3 scripts/gpu/capture_traces.py resnet50 --per-launch --faults uvm-tools --iterations 5 --timeout 320 --out $OUT/r 2>&1 | tail -20
date
cd $OUT && tar czf results.tgz r && rm -rf r
