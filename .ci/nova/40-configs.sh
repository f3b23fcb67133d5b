#!/bin/bash
# Writes every config file under $ST (nothing in /etc is touched).
set -euo pipefail
. "$(dirname "$0")/env.sh"
mkdir -p "$ST"/{nova,placement,glance/images,glance/staging,glance/tasks,neutron,logs,pids,locks}

authtoken() {  # $1 = service user
cat <<EOC
[keystone_authtoken]
www_authenticate_uri = http://127.0.0.1:$KS_PORT/v3
auth_url = http://127.0.0.1:$KS_PORT/v3
auth_type = password
project_domain_name = Default
user_domain_name = Default
project_name = service
username = $1
password = ${1}pass
service_token_roles_required = true
EOC
}
svcauth() {  # keystoneauth section for service-to-service calls; $1 = section
cat <<EOC
[$1]
auth_type = password
auth_url = http://127.0.0.1:$KS_PORT/v3
project_domain_name = Default
user_domain_name = Default
project_name = service
username = nova
password = novapass
region_name = RegionOne
valid_interfaces = public
EOC
}

# ---------------- placement ----------------
{ cat <<EOC
[DEFAULT]
debug = false
[api]
auth_strategy = keystone
[placement_database]
connection = $DB/${DBP}placement?charset=utf8
[oslo_policy]
policy_file = $ST/placement/policy.yaml
EOC
authtoken placement; } > "$ST/placement/placement.conf"

# ---------------- nova (shared by api, conductor, scheduler, computes) ----------------
cp /etc/nova/api-paste.ini "$ST/nova/api-paste.ini"
{ cat <<EOC
[DEFAULT]
debug = false
host = nova-ctl
my_ip = 127.0.0.1
state_path = $ST/nova
instances_path = $ST/nova/instances
transport_url = $TRANSPORT_URL
compute_driver = fake.FakeDriver
osapi_compute_workers = 1
metadata_workers = 1
# servers have no ports (--nic none): do not heal network info caches (a neutron call per instance per minute)
heal_instance_info_cache_interval = -1
[api]
auth_strategy = keystone
[wsgi]
api_paste_config = $ST/nova/api-paste.ini
[conductor]
workers = 1
[scheduler]
workers = 1
# pick up new nova-compute hosts by itself (seconds); discover_hosts is also run explicitly
discover_hosts_in_cells_interval = 30
[filter_scheduler]
# Blazar's scheduler set-up (blazar-nova's BlazarFilter, vendored in blazarnova/, on the
# scheduler's PYTHONPATH): the reservation hint, the freepool, and the filters instance
# reservations rely on.
available_filters = nova.scheduler.filters.all_filters
available_filters = blazarnova.scheduler.filters.blazar_filter.BlazarFilter
enabled_filters = ComputeFilter,AvailabilityZoneFilter,ComputeCapabilitiesFilter,ImagePropertiesFilter,ServerGroupAntiAffinityFilter,ServerGroupAffinityFilter,AggregateInstanceExtraSpecsFilter,AggregateMultiTenancyIsolation,BlazarFilter
[oslo_concurrency]
lock_path = $ST/locks
[oslo_messaging_rabbit]
amqp_durable_queues = false
# Versioned notifications (service.update among them) on the RPC broker (transport_url
# above), topic exchange nova, routing key versioned_notifications.info: Climate's
# notification monitor binds its own queue there (--nova-notifications).
[oslo_messaging_notifications]
driver = messagingv2
[notifications]
notification_format = versioned
[oslo_policy]
policy_file = $ST/nova/policy.yaml
[vnc]
enabled = false
[spice]
enabled = false
[glance]
region_name = RegionOne
valid_interfaces = public
[cinder]
os_region_name = RegionOne
EOC
authtoken nova
svcauth placement
svcauth neutron
echo "service_metadata_proxy = false"
} > "$ST/nova/nova.conf"
# DB credentials only for api/conductor/scheduler/nova-manage. nova-compute must not get [api_database]:
# with it, every compute start logs "ERROR nova.db.main.api No DB access allowed in nova-compute".
printf '[api_database]\nconnection = %s\n[database]\nconnection = %s\n' \
  "$DB/${DBP}nova_api?charset=utf8" "$DB/${DBP}nova_cell1?charset=utf8" > "$ST/nova/nova-db.conf"
# per-compute overrides (second --config-file wins)
for h in $COMPUTE_HOSTS; do
  printf '[DEFAULT]\nhost = %s\ninstances_path = %s\n' "$h" "$ST/nova/instances-$h" > "$ST/nova/compute-$h.conf"
done

# ---------------- glance (file store) ----------------
{ cat <<EOC
[DEFAULT]
debug = false
bind_host = 127.0.0.1
bind_port = $GL_PORT
# 0 = serve in the main process (no forked worker; saves ~140 MB). No inline comments in oslo.config files!
workers = 0
enabled_backends = fs:file
[glance_store]
default_backend = fs
[fs]
filesystem_store_datadir = $ST/glance/images
[os_glance_staging_store]
filesystem_store_datadir = $ST/glance/staging
[os_glance_tasks_store]
filesystem_store_datadir = $ST/glance/tasks
[database]
connection = $DB/${DBP}glance?charset=utf8
[paste_deploy]
flavor = keystone
config_file = /etc/glance/glance-api-paste.ini
[oslo_concurrency]
lock_path = $ST/locks
[oslo_policy]
policy_file = $ST/glance/policy.yaml
EOC
authtoken glance; } > "$ST/glance/glance-api.conf"
echo "configs written under $ST"
