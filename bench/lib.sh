# lib.sh — shared by the bench scripts (sourced from the repository root): the GPT-2-tokenized tiny
# Shakespeare they train on, made when missing, and the median of numbers read one per line.
DATA=build/data/shakespeare-gpt2
[ -f "$DATA/meta.json" ] || build/gptc prepare --tokenizer gpt2 data/tinyshakespeare.txt --out "$DATA" >/dev/null
median() { sort -n | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
