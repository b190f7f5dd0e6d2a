# call 5: the issuer thread against the engine's own, with history victims, GPT-2 at both budgets (issuer-with-history's first command, shorter deadline)
. out/prep.sh
mkdir -p $OUT/r
python3 scripts/bench_train gpt2 --budgets 0.5,0.75 --runs deepum,deepum-no-issuer --deadline 150 --timeout 60 --out $OUT/r/issuer > $OUT/r/issuer.log 2>&1
echo "rc=$?"; grep -v "^wrote" $OUT/r/issuer.log | tail -14
(cd $OUT && tar czf r5.tgz r && rm -rf r)
