#!/bin/bash
# OPTIONAL: config + schema for a REAL neutron-server (ML2, flat type, no mechanism drivers, no agents)
# instead of neutron-stub.py. Needs: apt-get install --no-install-recommends neutron-server
# Enable with NEUTRON=real in the environment of 60-start.sh.
set -euo pipefail
. "$(dirname "$0")/env.sh"
mkdir -p "$ST/neutron" "$ST/logs"
cat > "$ST/neutron/neutron.conf" <<EOC
[DEFAULT]
debug = false
bind_host = 127.0.0.1
bind_port = $NET_PORT
core_plugin = ml2
# router: the floating IP API (no L3 agent: addresses are made and deleted, not routed)
service_plugins = router
auth_strategy = keystone
transport_url = $TRANSPORT_URL
api_workers = 0
rpc_workers = 0
rpc_state_report_workers = 0
notify_nova_on_port_status_changes = false
notify_nova_on_port_data_changes = false
dhcp_agent_notification = false
state_path = $ST/neutron
[database]
connection = $DB/${DBP}neutron?charset=utf8
[oslo_concurrency]
lock_path = $ST/locks
[oslo_policy]
policy_file = $ST/neutron/policy.yaml
[keystone_authtoken]
www_authenticate_uri = http://127.0.0.1:$KS_PORT/v3
auth_url = http://127.0.0.1:$KS_PORT/v3
auth_type = password
project_domain_name = Default
user_domain_name = Default
project_name = service
username = neutron
password = neutronpass
[ml2]
type_drivers = flat
tenant_network_types =
mechanism_drivers =
extension_drivers = port_security
[ml2_type_flat]
flat_networks = *
EOC
t0=$(date +%s)
neutron-db-manage --config-file "$ST/neutron/neutron.conf" upgrade heads > "$ST/logs/neutron-db-manage.log" 2>&1
echo "neutron db upgrade done in $(( $(date +%s)-t0 )) s"
