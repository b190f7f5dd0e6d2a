# call 4 (seventeenth session): GPT-2 XL at 50%, runs of uses (this tree), right after call 3's run of the core before
. out/prep.sh >/dev/null
timeout 330 python3 scripts/bench_train gpt2-xl --budgets 0.5 --runs deepum --deadline 310 --timeout 170 \
  --warmup 3 --settle 13 --iterations 3 --out $OUT/xl > $OUT/xl.log 2>&1
grep -v "^wrote" $OUT/xl.log | tail -6
cd $OUT && tar czf xl50-new.tgz xl xl.log && rm -rf xl && ls -la
