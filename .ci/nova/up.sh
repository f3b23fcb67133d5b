#!/bin/bash
# Full bring-up from nothing (packages already installed, see install.sh): keystone, register, DBs, configs, db sync, start.
set -euo pipefail
cd "$(dirname "$0")"; . ./env.sh
[ -e "$ST" ] && { echo "$ST exists; run ./teardown.sh first" >&2; exit 1; }
T0=$(date +%s)
step() { local s=$(date +%s); "$@"; echo "[$(( $(date +%s)-s )) s] $1"; }
step ./10-keystone-up.sh
step ./20-register.sh
step ./30-backends.sh
step ./40-configs.sh
step ./50-dbsync.sh
[ "${NEUTRON:-stub}" = real ] && step ./45-neutron-real.sh
step ./60-start.sh
echo "TOTAL bring-up: $(( $(date +%s)-T0 )) s"
