. out/prep.sh
python3 scripts/calibrate --only read-duplication,bulk-prefetch-and-eviction,per-2MiB-prefetch-calls --buffer-gib 8 -o $OUT/calibration-readdup.json
