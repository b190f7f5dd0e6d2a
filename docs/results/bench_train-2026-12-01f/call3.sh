# call 3 (nineteenth session): forgetting only where memory is tight (the gate), against the plain engine, at 50%: BERT three tries, GPT-2 two, alternating, settled; engine logs
. out/prep.sh
mkdir -p $OUT/logs
for m in "bert 0.5 3 170" "gpt2 0.5 2 230"; do set -- $m
  DEEPUM_ENGINE_LOG=$OUT/logs/engine-%p.log timeout $(($4+40)) python3 scripts/bench_train $1 --budgets $2 --runs deepum,deepum+FORGET_UNSETTLED=1 --repeat $3 \
    --deadline $4 --timeout 70 --warmup 3 --settle 15 --iterations 3 --out $OUT/$1-$2 > $OUT/$1-$2.log 2>&1
  grep -v "^wrote" $OUT/$1-$2.log | tail -7
done
gzip $OUT/logs/*.log
cd $OUT && tar czf forget-call3.tgz bert-* gpt2-* && tar cf logs-call3.tar logs && rm -rf bert-0.5 gpt2-0.5 logs && ls -la
