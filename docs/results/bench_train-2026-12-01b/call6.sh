# call 6 (fifteenth session): the writer on the small models, settled (it lost on BERT before history victims and settling)
. out/prep.sh
timeout 130 python3 scripts/bench_train bert --budgets 0.5 --runs deepum-writer,deepum,deepum+WRITER=1,deepum+ISSUER=1 \
  --deadline 120 --timeout 60 --warmup 3 --settle 15 --iterations 3 --out $OUT/bert > $OUT/bert.log 2>&1
grep -v "^wrote" $OUT/bert.log | tail -7
timeout 95 python3 scripts/bench_train gpt2 --budgets 0.5 --runs deepum-writer,deepum \
  --deadline 90 --timeout 60 --warmup 3 --settle 15 --iterations 3 --out $OUT/gpt2 > $OUT/gpt2.log 2>&1
grep -v "^wrote" $OUT/gpt2.log | tail -5
cd $OUT && tar czf small-writer.tgz bert gpt2 bert.log gpt2.log && rm -rf bert gpt2
