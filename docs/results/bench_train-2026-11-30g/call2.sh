. out/prep.sh
mkdir -p $OUT/r
start=$(date +%s)
for m in "gpt2 190" "bert 125" "resnet50 115"; do set -- $m
  timeout $(($2 + 45)) python3 scripts/bench_train $1 --budgets 0.5 --runs deepum,deepum-writer,deepum+ISSUER=1,deepum+WRITER=1 \
     --deadline $2 --timeout 60 --out $OUT/r/writer2 2>&1 | grep -v "^wrote" | tail -9
  (cd $OUT && tar czf results.tgz r)
done
left=$((560 - $(date +%s) + start))
echo "tracer tests with $left s left"
timeout $left python3 -m pytest -m gpu tests/gpu/test_userlib_gpu.py -v -k "tracer or tracing" 2>&1 | tail -25 | tee $OUT/r/tracer-gpu-tests.log
(cd $OUT && tar czf results.tgz r && rm -rf r)
