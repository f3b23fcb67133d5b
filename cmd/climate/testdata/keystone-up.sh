#!/bin/bash
# Usage: keystone-up.sh STATEDIR PORT [uwsgi|wsgiref]
#
# A throw-away OpenStack Keystone from Debian's packages (keystone, sqlite3; uwsgi-core and
# uwsgi-plugin-python3 for the uwsgi mode) on 127.0.0.1:PORT: SQLite in WAL mode and fernet
# tokens, all state in STATEDIR (nothing under /etc/keystone is read or written), bootstrap
# admin/adminpass in project admin, region RegionOne. Then run keystone-register.sh.
#
# By default the server runs in the background (its pid in STATEDIR/keystone.pid) and the
# script returns once Keystone answers. With KEYSTONE_FOREGROUND=1 the script execs the
# server in the foreground instead, so that the caller (the Go tests) owns the process.
#
# Stop it with: kill $(cat STATEDIR/keystone.pid); then remove STATEDIR.
set -euo pipefail
D=${1:?usage: keystone-up.sh STATEDIR PORT [uwsgi|wsgiref]}; P=${2:?port}; MODE=${3:-uwsgi}
D=$(realpath -m "$D")
mkdir -p "$D"
cat > "$D/keystone.conf" <<EOC
[DEFAULT]
debug = false
[database]
connection = sqlite:///$D/keystone.db
[token]
provider = fernet
expiration = ${KEYSTONE_TOKEN_EXPIRATION:-3600}
[fernet_tokens]
key_repository = $D/fernet-keys
[fernet_receipts]
key_repository = $D/fernet-receipts
[credential]
key_repository = $D/credential-keys
EOC
KM="keystone-manage --config-file $D/keystone.conf"
# keystone-manage ends with a harmless eventlet traceback on stderr; the logs keep it.
$KM db_sync >"$D/manage.log" 2>&1
# WAL, or SQLite answers "database is locked" (HTTP 500) on about the second write.
sqlite3 "$D/keystone.db" 'PRAGMA journal_mode=WAL;' >/dev/null
$KM fernet_setup --keystone-user "$(id -un)" --keystone-group "$(id -gn)" >>"$D/manage.log" 2>&1
$KM credential_setup --keystone-user "$(id -un)" --keystone-group "$(id -gn)" >>"$D/manage.log" 2>&1
$KM bootstrap --bootstrap-password adminpass --bootstrap-username admin \
  --bootstrap-project-name admin --bootstrap-role-name admin \
  --bootstrap-service-name keystone --bootstrap-region-id RegionOne \
  --bootstrap-admin-url http://127.0.0.1:$P/v3/ \
  --bootstrap-internal-url http://127.0.0.1:$P/v3/ \
  --bootstrap-public-url http://127.0.0.1:$P/v3/ >>"$D/manage.log" 2>&1

case "$MODE" in
uwsgi)
  # Single-threaded workers, and Connection: close (uwsgi's --http-socket resets
  # keep-alive connections that clients reuse).
  server=(uwsgi --plugins python3 --http-socket "127.0.0.1:$P"
    --wsgi-file /usr/bin/keystone-wsgi-public --env "OS_KEYSTONE_CONFIG_DIR=$D"
    --master --processes "${KEYSTONE_PROCESSES:-2}" --lazy-apps --die-on-term --need-app
    --add-header "Connection: close" --buffer-size 65535 --pidfile "$D/keystone.pid") ;;
wsgiref)
  # The single-threaded development server shipped in keystone-wsgi-public.
  export OS_KEYSTONE_CONFIG_DIR=$D
  server=(/usr/bin/keystone-wsgi-public --host 127.0.0.1 --port "$P") ;;
*)
  echo "keystone-up.sh: mode $MODE: want uwsgi or wsgiref" >&2; exit 2 ;;
esac

if [ -n "${KEYSTONE_FOREGROUND:-}" ]; then
  echo $$ >"$D/keystone.pid"
  exec "${server[@]}" >>"$D/keystone.log" 2>&1 </dev/null
fi
setsid "${server[@]}" >>"$D/keystone.log" 2>&1 </dev/null &
[ "$MODE" = wsgiref ] && echo $! >"$D/keystone.pid"
for _ in $(seq 1 240); do
  if curl -sf -o /dev/null "http://127.0.0.1:$P/v3"; then
    echo "keystone up on 127.0.0.1:$P (pid $(cat "$D/keystone.pid"))"
    exit 0
  fi
  sleep 0.25
done
echo "keystone did not come up; see $D/keystone.log" >&2
exit 1
