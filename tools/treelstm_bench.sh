#!/bin/sh
# Trees per second of the TreeLSTM example (hidden and embedding 128) on SST
# test trees, with and without `join`, by strategy and batch size; the
# median of 3 runs of the execution alone (`wall_seconds` of --stats), and
# the lane utilization. Not run by CI.
#   tools/treelstm_bench.sh [BATCH_SIZES...]   (default 8 64 256)
set -e
cd "$(dirname "$0")/.."
BIN=target/release/autobatch
cargo build --release -q -p autobatch-cli
# numpy for the inputs: the pinned one of tools/peers/install when there.
PY=python3
[ -x .peers/numpy/bin/python ] && PY=.peers/numpy/bin/python
SIZES=${*:-8 64 256}
printf "%-14s %-16s %6s %10s %8s\n" model strategy batch trees/s util
for n in $SIZES; do
    in=/tmp/treelstm_$n.json
    [ -f $in ] || $PY tools/treelstm_inputs.py examples/data/sst/test.txt \
        --trees $n --hidden 128 --embed 128 --out $in 2>/dev/null
    for model in treelstm treelstm_seq; do
        for strategy in program-counter local-static reference; do
            for i in 1 2 3; do
                $BIN run examples/models/$model.ab --entry classify --inputs $in \
                    --strategy $strategy --stats --output /tmp/treelstm_out.json
                python3 -c "import json;s=json.load(open('/tmp/treelstm_out.json'))['stats'];print(s['wall_seconds'],s['lane_utilization'])"
            done | sort -n | sed -n 2p | while read wall util; do
                python3 -c "print('%-14s %-16s %6d %10.0f %8.3f' % ('$model', '$strategy', $n, $n / $wall, $util))"
            done
        done
    done
done
