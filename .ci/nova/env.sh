# Common settings of the real Nova that CI brings up for the OpenStack driver's tests (adapted from
# shared/reference/nova-on-loopback). Source it from this folder: . ./env.sh
R=${R:-$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)}   # recipe dir (scripts)
ST=${ST:-${TMPDIR:-/tmp}/climate-nova}  # all runtime state: configs, logs, pids, sqlite, images
KS_PORT=${KS_PORT:-35357}                # keystone
PL_PORT=${PL_PORT:-8778}                 # placement
NOVA_PORT=${NOVA_PORT:-8774}             # nova-api (compute API)
GL_PORT=${GL_PORT:-9292}                 # glance-api
NET_PORT=${NET_PORT:-9696}               # neutron (stub by default)
DBP=${DBP:-climate_nova_}                        # prefix of the MariaDB databases this recipe creates
DB="mysql+pymysql://root@127.0.0.1:3306" # MariaDB, root, empty password
RMQ_VHOST=${RMQ_VHOST:-climate-nova}      # RabbitMQ vhost this recipe creates (guest/guest)
TRANSPORT_URL="rabbit://guest:guest@127.0.0.1:5672/$RMQ_VHOST"
KS_URL="http://127.0.0.1:$KS_PORT/v3"
PY=/usr/bin/python3                      # Debian's python, NOT the pyenv python3 on PATH
COMPUTE_HOSTS=${COMPUTE_HOSTS:-"fake-1 fake-2"}
export OS_AUTH_TYPE=password OS_AUTH_URL=$KS_URL OS_IDENTITY_API_VERSION=3 \
  OS_USERNAME=admin OS_PASSWORD=adminpass OS_PROJECT_NAME=admin \
  OS_USER_DOMAIN_NAME=Default OS_PROJECT_DOMAIN_NAME=Default OS_REGION_NAME=RegionOne OS_INTERFACE=public
