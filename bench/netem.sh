#!/bin/bash
# netem.sh up [DELAY] | down — the network of "climate bench api --database-delay" (as root).
#
# up: a network namespace $NETNS joined to this one by a veth pair, $SUBNET.1 on this side
# ("${VETH}0") and $SUBNET.2 inside ("${VETH}1"), and, given DELAY (e.g. 0.5ms, half the
# round trip), "tc qdisc netem delay DELAY" on both ends. It prints "netem" when the delay
# is on the link, "no-netem" when the kernel has no netem (CONFIG_NET_SCH_NETEM) or no
# DELAY was given. Running it again leaves the same network.
# down: removes the pair and the namespace, if there.
set -euo pipefail

NETNS=${NETNS:-climate-bench}
VETH=${VETH:-cbench}
SUBNET=${SUBNET:-10.213.77}

up() {
	local delay=${1:-}
	[ -e "/run/netns/$NETNS" ] || ip netns add "$NETNS"
	if ! ip link show "${VETH}0" >/dev/null 2>&1; then
		ip link add "${VETH}0" type veth peer name "${VETH}1" netns "$NETNS"
	fi
	ip addr replace "$SUBNET.1/30" dev "${VETH}0"
	ip link set "${VETH}0" up
	ip -n "$NETNS" addr replace "$SUBNET.2/30" dev "${VETH}1"
	ip -n "$NETNS" link set "${VETH}1" up
	ip -n "$NETNS" link set lo up
	if [ -n "$delay" ] &&
		tc qdisc replace dev "${VETH}0" root netem delay "$delay" 2>/dev/null &&
		tc -n "$NETNS" qdisc replace dev "${VETH}1" root netem delay "$delay"; then
		echo netem
		return
	fi
	# No delay on the link: drop a netem left by an earlier "up DELAY".
	tc qdisc del dev "${VETH}0" root 2>/dev/null || true
	tc -n "$NETNS" qdisc del dev "${VETH}1" root 2>/dev/null || true
	echo no-netem
}

down() {
	ip link del "${VETH}0" 2>/dev/null || true # takes its peer in the namespace along
	if [ -e "/run/netns/$NETNS" ]; then ip netns del "$NETNS"; fi
}

case "${1:-}" in
up) up "${2:-}" ;;
down) down ;;
*)
	echo "usage: $0 up [DELAY] | down" >&2
	exit 2
	;;
esac
