. out/prep.sh
mkdir -p $OUT/r
date
timeout 250 python3 scripts/gpu/pending_measurements calibrate --out $OUT/r; echo rc=$?
date
timeout 330 python3 scripts/gpu/pending_measurements window-history --out $OUT/r; echo rc=$?
date
tail -n 30 $OUT/r/*.log
cd $OUT && tar czf results.tgz r && rm -rf r
