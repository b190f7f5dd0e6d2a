. out/prep.sh
mkdir -p $OUT/r
date
timeout 560 python3 scripts/gpu/pending_measurements writer --out $OUT/r; echo rc=$?
date
grep -h -A14 "^model\|iteration ms\|^run " $OUT/r/writer.log | head -80
cd $OUT && tar czf results.tgz r && rm -rf r
