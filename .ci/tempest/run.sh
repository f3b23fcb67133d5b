#!/bin/bash
# Blazar's own acceptance suite (blazar-tempest-plugin) against Climate and the real Nova of
# .ci/nova (which must be up: NEUTRON=real up.sh). Debian has tempest and gabbi but not the
# plugin: BLAZAR_TEMPEST_PLUGIN names a checkout of openstack/blazar-tempest-plugin (tag
# 2023.1-last matches Debian bookworm's tempest 33). Installs the Debian packages itself,
# registers Climate in the stack's Keystone, serves it (--auth keystone --driver openstack),
# puts devstack's URL layout on port 80 (the plugin's API tests hard-code
# http://127.0.0.1/reservation/… and /compute/…), and runs the API tests, then the
# scenario tests, one at a time (the API tests count the leases they made).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
: "${BLAZAR_TEMPEST_PLUGIN:?set it to a checkout of openstack/blazar-tempest-plugin (e.g. tag 2023.1-last)}"
plugin=$(cd "$BLAZAR_TEMPEST_PLUGIN" && pwd)
work=${TMPDIR:-/tmp}/climate-tempest
port=${CLIMATE_TEMPEST_PORT:-1234}

if [ ! -x /usr/bin/tempest ] || ! /usr/bin/python3 -c 'import gabbi' 2>/dev/null; then
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq -o DPkg::Lock::Timeout=600 python3-tempest python3-gabbi >/dev/null
fi

cd "$repo/.ci/nova" && . ./env.sh && cd "$repo"
rm -rf "$work" && mkdir -p "$work/site" "$work/data"
# The plugin, importable and registered as a tempest plugin (its entry point) without pip.
ln -s "$plugin/blazar_tempest_plugin" "$work/site/blazar_tempest_plugin"
mkdir -p "$work/site/blazar_tempest_plugin-0.dist-info"
printf 'Metadata-Version: 2.1\nName: blazar-tempest-plugin\nVersion: 0\n' >"$work/site/blazar_tempest_plugin-0.dist-info/METADATA"
printf '[tempest.test_plugins]\nblazar_tests = blazar_tempest_plugin.plugin:BlazarTempestPlugin\n' >"$work/site/blazar_tempest_plugin-0.dist-info/entry_points.txt"

go build -o "$work/climate" ./cmd/climate
export CLIMATE_KEYSTONE_PASSWORD=climate-tempest-pass
"$work/climate" keystone register --url "http://127.0.0.1:$port/v1" >/dev/null
"$work/climate" serve --auth keystone --driver openstack --listen "127.0.0.1:$port" --data-dir "$work/data" \
  --keystone-url "$KS_URL" --keystone-username blazar --keystone-project service >"$work/climate.log" 2>&1 &
climate_pid=$!
CLIMATE_PORT=$port /usr/bin/python3 "$here/devstack-proxy.py" >"$work/proxy.log" 2>&1 &
proxy_pid=$!
trap 'kill $climate_pid $proxy_pid 2>/dev/null || true' EXIT
for _ in $(seq 100); do
  curl -fsS -o /dev/null "http://127.0.0.1/reservation/" 2>/dev/null && break
  sleep 0.2 # until Climate and the proxy listen
done

# An image and a flavor to boot (the Go tests' own, made here if missing).
image=$(openstack image list --name climate-test-img -f value -c ID | head -1)
if [ -z "$image" ]; then
  head -c 1024 /dev/zero >"$work/img.raw"
  image=$(openstack image create --disk-format raw --container-format bare --file "$work/img.raw" climate-test-img -f value -c id)
fi
openstack image set --public "$image" # the tests' non-admin user reads it too
flavor=$(openstack flavor show climate-test -f value -c id 2>/dev/null || openstack flavor create --vcpus 1 --ram 64 --disk 0 climate-test -f value -c id)
openstack aggregate show freepool >/dev/null 2>&1 || openstack aggregate create freepool >/dev/null

cd "$work" && tempest init ws >/dev/null && cd ws
sed -e "s|@KS_URL@|$KS_URL|" -e "s|@IMAGE@|$image|" -e "s|@FLAVOR@|$flavor|" "$here/tempest.conf.in" >etc/tempest.conf
export PYTHONPATH=$work/site
status=0
tempest run --serial --regex 'blazar_tempest_plugin.tests.api' || status=1
# The scenario tests assume Blazar's gate, where the one compute host is Blazar's: a boot
# without the reservation hint must find no host. Every hypervisor is registered (and so
# in the freepool) first (the API tests count hosts, so after them).
token=$(openstack token issue -f value -c id)
for h in $(openstack hypervisor list -f value -c "Hypervisor Hostname"); do
  curl -fsS -o /dev/null -X POST -H "X-Auth-Token: $token" -H 'Content-Type: application/json' \
    -d "{\"name\": \"$h\"}" "http://127.0.0.1:$port/v1/os-hosts"
done
tempest run --serial --regex 'blazar_tempest_plugin.tests.scenario' || status=1
exit $status
