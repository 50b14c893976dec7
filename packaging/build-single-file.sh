#!/usr/bin/env bash
# Builds dist/ember.pyz: one self-contained file (a shiv zipapp) holding Ember and every
# dependency, CPU PyTorch included, for edge boxes with Python 3.11 on the same platform.
# Native libraries unpack once into ~/.shiv on first run; later starts reuse them.
#   bash packaging/build-single-file.sh && ./dist/ember.pyz --version
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
OUT=${1:-dist/ember.pyz}
mkdir -p "$(dirname "$OUT")"
"$PY" -m pip install -q shiv
"$PY" -m pip wheel -q --no-deps -w dist/wheel .
wheel=$(ls -t dist/wheel/ember-*.whl | head -1)
# torch==2.13.0 pins the CPU build; starter and server extras make the file useful offline.
"$PY" -m shiv --compressed --reproducible -p '/usr/bin/env python3' -c ember -o "$OUT" \
    torch==2.13.0 "${wheel}[server,starter]"
echo "built $OUT ($(du -h "$OUT" | cut -f1))"
