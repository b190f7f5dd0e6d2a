. out/prep.sh
mkdir -p $OUT/r
date
b() { # model budget lookahead deadline
  timeout $(( $4 + 70 )) python3 scripts/bench_train $1 --budgets $2 --runs deepum,deepum+LOOKAHEAD_BLOCKS=$3 --deadline $4 --timeout 60 --out $OUT/r/window-quarter-$1-$2 2>&1 | grep -v "^wrote" | tail -8
  date; (cd $OUT && tar czf results.tgz r)
}
b gpt2 0.5 608 90
b gpt2 0.75 912 90
b resnet50 0.5 226 50
b resnet50 0.75 339 50
b bert 0.5 238 55
cd $OUT && rm -rf r
