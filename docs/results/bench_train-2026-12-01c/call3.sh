# call 3 (sixteenth session): GPT-2 XL at 75%, history as runs of uses (this tree) against first/last use (out/before)
. out/prep.sh
make -C out/before/userlib -s BUILD=$PWD/build/userlib-before || echo "before build failed"
timeout 520 python3 scripts/bench_train gpt2-xl --budgets 0.75 --runs deepum,deepum@before \
  --library before=build/userlib-before/libdeepum.so --deadline 330 --timeout 220 \
  --warmup 3 --settle 20 --iterations 3 --out $OUT/xl > $OUT/xl.log 2>&1
grep -v "^wrote" $OUT/xl.log | tail -6
cd $OUT && tar czf xl.tgz xl xl.log && rm -rf xl && ls -la
