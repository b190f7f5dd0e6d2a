# call 6 (sixteenth session): GPT-2 XL at 50%, runs of uses against first and last use, one pair
. out/prep.sh >/dev/null
make -C out/before/userlib -s BUILD=$PWD/build/userlib-before || echo "before build failed"
timeout 395 python3 scripts/bench_train gpt2-xl --budgets 0.5 --runs deepum,deepum@before \
  --library before=build/userlib-before/libdeepum.so --deadline 250 --timeout 170 \
  --warmup 3 --settle 14 --iterations 3 --out $OUT/xl > $OUT/xl.log 2>&1
grep -v "^wrote" $OUT/xl.log | tail -6
cd $OUT && tar czf xl50.tgz xl xl.log && rm -rf xl
