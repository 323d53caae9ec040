#!/usr/bin/env bash
# Renders the simulator's HTML report in headless Chromium to a PNG, as a reader's
# browser shows it. Needs Debian's chromium (apt-get install -y chromium).
#
#   scripts/render-sim-report.sh [OUT.png]
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-tollgate-sim-report.png}
html=$(mktemp --suffix=.html)
trap 'rm -f "$html"' EXIT
cargo run -q -p tollgate-sim -- report --out "$html"
chromium --headless --no-sandbox --disable-gpu --hide-scrollbars \
    --window-size=1000,2400 --screenshot="$out" "file://$html"
echo "wrote $out"
