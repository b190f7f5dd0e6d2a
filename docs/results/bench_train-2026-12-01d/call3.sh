# call 3 (seventeenth session): GPT-2 XL at 50%, runs of uses (this tree) against first and last use (a8eab26)
. out/prep.sh >/dev/null
make -C out/before/userlib -s BUILD=$PWD/build/userlib-before || echo "before build failed"
timeout 470 python3 scripts/bench_train gpt2-xl --budgets 0.5 --runs deepum@before,deepum \
  --library before=build/userlib-before/libdeepum.so --deadline 300 --timeout 170 \
  --warmup 3 --settle 13 --iterations 3 --out $OUT/xl > $OUT/xl.log 2>&1
grep -v "^wrote" $OUT/xl.log | tail -6
cd $OUT && tar czf xl50.tgz xl xl.log && rm -rf xl && ls -la
