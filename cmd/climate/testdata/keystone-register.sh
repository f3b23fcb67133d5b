#!/bin/bash
# Usage: keystone-register.sh PORT CLIMATE_URL
#
# Registers Climate in the Keystone that keystone-up.sh started on 127.0.0.1:PORT, as an
# operator registers Blazar: service "blazar" of type "reservation" with public, internal
# and admin endpoints at CLIMATE_URL (e.g. http://127.0.0.1:1234/v1), and the users the
# tests need:
#   demo/demopass    member of project demo
#   demo2/demo2pass  member of project other
#   blazar/blazarpass  Climate's service user: roles service and admin on project service
# All in domain Default; the admin is admin/adminpass in project admin (bootstrap).
set -euo pipefail
P=${1:?usage: keystone-register.sh PORT CLIMATE_URL}; URL=${2:?climate url}
export OS_AUTH_TYPE=password OS_AUTH_URL=http://127.0.0.1:$P/v3 OS_IDENTITY_API_VERSION=3 \
  OS_USERNAME=admin OS_PASSWORD=adminpass OS_PROJECT_NAME=admin \
  OS_USER_DOMAIN_NAME=Default OS_PROJECT_DOMAIN_NAME=Default OS_REGION_NAME=RegionOne
# One openstack process reading commands from stdin (about 9 s instead of 2-3 s a
# command). Its batch mode splits quoted arguments: single words only.
out=$(openstack 2>&1 <<EOC
service create --name blazar --description Reservation reservation
endpoint create --region RegionOne blazar public $URL
endpoint create --region RegionOne blazar internal $URL
endpoint create --region RegionOne blazar admin $URL
project create --domain Default service
project create --domain Default demo
project create --domain Default other
user create --domain Default --password demopass demo
user create --domain Default --password demo2pass demo2
role add --project demo --user demo member
role add --project other --user demo2 member
role create service
user create --domain Default --password blazarpass blazar
role add --project service --user blazar service
role add --project service --user blazar admin
EOC
) || { echo "$out" >&2; exit 1; }
# Batch mode goes on after a failed command: check the result instead.
check=$(openstack endpoint list --service reservation -f value -c Interface 2>&1 | sort | tr '\n' ' ')
if [ "$check" != "admin internal public " ]; then
  echo "keystone-register.sh: the reservation endpoints are missing ($check)" >&2
  echo "$out" >&2
  exit 1
fi
roles=$(openstack role assignment list --user blazar --project service --names -f value -c Role 2>&1 | sort | tr '\n' ' ')
if [ "$roles" != "admin service " ]; then
  echo "keystone-register.sh: blazar's roles are \"$roles\"" >&2
  echo "$out" >&2
  exit 1
fi
echo "registered reservation service at $URL in Keystone on 127.0.0.1:$P"
