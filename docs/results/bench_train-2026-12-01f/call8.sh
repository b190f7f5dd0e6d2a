# call 8 (nineteenth session): calibrate's both-directions group with its new one-stream figures: a write-back and a prefetch from one thread on one stream, batches alternating, as the engine issues them
. out/prep.sh
timeout 170 python3 scripts/calibrate --only both-directions,bulk-prefetch-and-eviction -o $OUT/both-directions.json > $OUT/calibrate.log 2>&1
echo "calibrate rc=$?"; tail -30 $OUT/calibrate.log
