#!/bin/bash
# Starts placement, glance-api, the neutron stub, nova-api, nova-conductor, nova-scheduler and one fake
# nova-compute per host in $COMPUTE_HOSTS; then maps the computes into cell1 and waits for 2 hypervisors.
# Every process is started with setsid; its PID is written to $ST/pids/<name>.pid.
set -euo pipefail
. "$(dirname "$0")/env.sh"
L=$ST/logs; P=$ST/pids; mkdir -p "$L" "$P"
t0=$(date +%s.%N)
el() { printf '%5.1f s' "$(echo "$(date +%s.%N) - $t0" | bc)"; }
start() {  # start NAME CMD...   (stdout+stderr -> $L/NAME.log)
  local n=$1; shift
  setsid "$@" >> "$L/$n.log" 2>&1 < /dev/null &
  echo $! > "$P/$n.pid"
}
uw() {  # uw NAME PORT WSGI-SCRIPT ENV=VALUE [ENV=VALUE] : a 1-worker uwsgi on 127.0.0.1:PORT
  local e=(--env "$4"); [ -n "${5:-}" ] && e+=(--env "$5")
  start "$1" uwsgi --plugins python3 --http-socket 127.0.0.1:$2 --wsgi-file "$3" "${e[@]}" \
    --master --processes 1 --lazy-apps --die-on-term --need-app --add-header "Connection: close" \
    --buffer-size 65535
}
waiturl() {  # waiturl NAME URL [tries of 0.5 s]
  for i in $(seq 1 ${3:-240}); do
    code=$(curl -s -o /dev/null -w '%{http_code}' "$2" || true)
    case $code in 2??|300) echo "$(el)  $1 answers $2 ($code)"; return 0;; esac
    sleep 0.5
  done
  echo "$1 did not come up; see $L/$1.log" >&2; return 1
}
NOVA="--config-file $ST/nova/nova.conf"                  # what nova-compute gets
NOVADB="$NOVA --config-file $ST/nova/nova-db.conf"     # api, conductor, scheduler, nova-manage
uw placement $PL_PORT /usr/bin/placement-api OS_PLACEMENT_CONFIG_DIR=$ST/placement
# conductor and scheduler exit at start-up if placement does not answer yet
# ("The placement service ... exists but does not have any supported versions"), so wait for it first.
waiturl placement http://127.0.0.1:$PL_PORT/
start glance-api glance-api --config-file $ST/glance/glance-api.conf
if [ "${NEUTRON:-stub}" = real ]; then    # real neutron-server (needs 45-neutron-real.sh first)
  start neutron-server neutron-server --config-file $ST/neutron/neutron.conf; NET=neutron-server
else                                       # 18 MB stand-in that answers Nova's port/network look-ups
  start neutron-stub $PY $R/neutron-stub.py $NET_PORT; NET=neutron-stub
fi
start nova-conductor nova-conductor $NOVADB
start nova-scheduler env PYTHONPATH=$R nova-scheduler $NOVADB   # $R holds blazarnova (BlazarFilter)
uw nova-api $NOVA_PORT /usr/bin/nova-api-wsgi OS_NOVA_CONFIG_DIR=$ST/nova "OS_NOVA_CONFIG_FILES=api-paste.ini;nova.conf;nova-db.conf"
for h in $COMPUTE_HOSTS; do
  mkdir -p "$ST/nova/instances-$h"
  start nova-compute-$h $PY -c 'import sys; from nova.cmd.compute import main; sys.exit(main())' \
    $NOVA --config-file $ST/nova/compute-$h.conf
done
waiturl $NET http://127.0.0.1:$NET_PORT/
if [ "$NET" = neutron-server ]; then
  # Neutron Zed bug: until some request has run an ordinary DB query (which configures the SQLAlchemy
  # mappers), GET /v2.0/ports answers 500 "AttributeError: type object 'Port' has no attribute
  # 'port_forwardings'" -- and Nova calls exactly that on every server create/show/list/delete.
  # Warm it up with one GET /v2.0/networks.
  TOK=$(curl -si -X POST $KS_URL/auth/tokens -H 'Content-Type: application/json' -d '{"auth":{"identity":{"methods":["password"],"password":{"user":{"name":"neutron","domain":{"name":"Default"},"password":"neutronpass"}}},"scope":{"project":{"name":"service","domain":{"name":"Default"}}}}}' | awk -F': ' 'tolower($1)=="x-subject-token"{print $2}' | tr -d '\r')
  curl -s -o /dev/null -H "X-Auth-Token: $TOK" http://127.0.0.1:$NET_PORT/v2.0/networks
  echo "$(el)  neutron warm-up: GET /v2.0/ports -> $(curl -s -o /dev/null -w '%{http_code}' -H "X-Auth-Token: $TOK" http://127.0.0.1:$NET_PORT/v2.0/ports)"
fi
waiturl glance-api http://127.0.0.1:$GL_PORT/
waiturl nova-api http://127.0.0.1:$NOVA_PORT/
# Ready = conductor, scheduler and every compute consume their RabbitMQ RPC queue (a compute starts its
# RPC server only after init_host + the first resource update, i.e. after its compute node exists).
want="conductor.nova-ctl scheduler.nova-ctl $(for h in $COMPUTE_HOSTS; do printf 'compute.%s ' $h; done)"
for i in $(seq 1 120); do
  q=$(rabbitmqctl -q list_queues -p "$RMQ_VHOST" name consumers 2>/dev/null | awk '$2>0{print $1}')
  miss=""; for w in $want; do echo "$q" | grep -qx "$w" || miss="$miss $w"; done
  [ -z "$miss" ] && break; sleep 1
done
[ -z "$miss" ] && echo "$(el)  RPC consumers up: $want" || { echo "not consuming:$miss" >&2; exit 1; }
# map new compute hosts into cell1 (idempotent; the scheduler also does it every 30 s)
nova-manage $NOVADB cell_v2 discover_hosts --verbose 2>/dev/null | grep -v '^$' | sed 's/^/      /'
n=$(echo $COMPUTE_HOSTS | wc -w)
for i in $(seq 1 120); do
  hv=$(openstack hypervisor list -f value -c 'Hypervisor Hostname' 2>/dev/null | wc -l)
  [ "$hv" -ge "$n" ] && break; sleep 1
done
echo "$(el)  openstack hypervisor list shows $hv hypervisors"
[ "$hv" -ge "$n" ]
