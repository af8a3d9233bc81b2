#!/usr/bin/env bash
# Fuzzes the front end (and the lowering): `autobatch::compile`, what
# `autobatch check` runs, on inputs from a coverage-guided fuzzer (cargo fuzz,
# libFuzzer). Installs cargo-fuzz if missing, builds the seed corpora from the
# test programs and examples, and runs each target for a share of the time.
#
#   tools/fuzz-frontend.sh [SECONDS] [TARGET...]
#
# SECONDS (default 600) is the total, split evenly between the targets
# (default: compile_tokens compile_grammar compile_bytes). One core; a crash
# stops its target and leaves the input in fuzz/artifacts/TARGET/.
# Reproduce one: cd fuzz && RUSTC_BOOTSTRAP=1 cargo fuzz run -O -s none TARGET FILE
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
seconds="${1:-600}"
shift || true
targets=("$@")
if [ "${#targets[@]}" -eq 0 ]; then
    targets=(compile_tokens compile_grammar compile_bytes)
fi

# cargo fuzz wants nightly for -Zsanitizer; RUSTC_BOOTSTRAP lets stable do it.
export RUSTC_BOOTSTRAP=1
command -v cargo-fuzz >/dev/null || cargo install cargo-fuzz --locked

cd "$root/fuzz"
python3 "$root/tools/fuzz-seeds.py" "$root"

share=$(( seconds / ${#targets[@]} ))
for target in "${targets[@]}"; do
    cargo fuzz build -O -s none "$target"
    echo "== $target for ${share}s"
    # -max_len: programs beyond 8 KiB rarely find more; -timeout: a hang is
    # anything over 10 s; -rss_limit_mb: the compiler thread reserves a big stack.
    # The dictionary is text: it helps the byte target, not the token or
    # grammar targets, whose bytes are choices.
    dict=()
    if [ "$target" = compile_bytes ]; then dict=(-dict=frontend.dict); fi
    mkdir -p "corpus/$target" "seeds/$target"
    cargo fuzz run -O -s none "$target" "corpus/$target" "seeds/$target" -- \
        -max_total_time="$share" -max_len=8192 -timeout=10 -rss_limit_mb=4096 \
        "${dict[@]}" -print_final_stats=1
done
