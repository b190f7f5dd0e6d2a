. out/prep.sh
mkdir -p $OUT/r
timeout 80 python3 scripts/bench_train resnet50 --budgets 0.5 --runs deepum+LOOKAHEAD_BLOCKS=226,deepum --deadline 75 --timeout 40 --out $OUT/r/window-quarter-resnet50-0.5 2>&1 | grep -v "^wrote" | tail -5
(cd $OUT && tar czf results.tgz r)
timeout 95 python3 scripts/bench_train bert --budgets 0.5 --runs deepum+LOOKAHEAD_BLOCKS=238,deepum --deadline 90 --timeout 40 --out $OUT/r/window-quarter-bert-0.5 2>&1 | grep -v "^wrote" | tail -5
(cd $OUT && tar czf results.tgz r)
