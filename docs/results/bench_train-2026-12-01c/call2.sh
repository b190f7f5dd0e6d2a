# call 2 (sixteenth session): history as runs of uses (this tree) against first/last use (HEAD before it, out/before)
. out/prep.sh
make -C out/before/userlib -s BUILD=$PWD/build/userlib-before || echo "before build failed"
L="--library before=build/userlib-before/libdeepum.so"
R=deepum,deepum@before,deepum+ISSUER=1,deepum+ISSUER=1@before
export DEEPUM_ENGINE_LOG=$OUT/logs/engine-%p.log; mkdir -p $OUT/logs
for m in "resnet50 150" "bert 150" "gpt2 170"; do set -- $m
  timeout $(($2+15)) python3 scripts/bench_train $1 --budgets 0.5 --runs $R $L --deadline $2 --timeout 60 \
    --warmup 3 --settle 15 --iterations 3 --out $OUT/$1 > $OUT/$1.log 2>&1
  grep -v "^wrote" $OUT/$1.log | tail -8
done
cd $OUT && for f in logs/*.log; do gzip -1 $f; done
tar czf runs.tgz resnet50 bert gpt2 *.log && tar cf logs.tar logs && rm -rf resnet50 bert gpt2 logs && ls -la
