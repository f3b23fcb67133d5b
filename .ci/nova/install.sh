#!/bin/bash
# Debian bookworm packages. No nova-compute package (it pulls libvirt/qemu); the fake driver is in python3-nova.
set -euo pipefail
export DEBIAN_FRONTEND=noninteractive
apt-get install -y --no-install-recommends -o DPkg::Lock::Timeout=600 \
  keystone placement-api nova-api nova-conductor nova-scheduler python3-nova \
  glance-api python3-openstackclient uwsgi-core uwsgi-plugin-python3 python3-pymysql \
  neutron-server
# Tools the scripts use and that were already present here: curl, bc, sqlite3, mysql (mariadb-client),
# rabbitmqctl (rabbitmq-server), /usr/bin/python3.
for t in curl bc sqlite3 mysql rabbitmqctl; do command -v $t >/dev/null || echo "MISSING: $t" >&2; done
# Nothing is started by the packages here: /usr/sbin/policy-rc.d exits 101 (Docker style) and there is no
# systemd. On a machine WITH a running init, the packages' own services (nova-api, glance-api, ...) would start
# with the stock /etc configs and take the same ports: stop/disable them; this recipe does not use them.
