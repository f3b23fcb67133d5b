#!/usr/bin/python3
"""Drives the real python-blazarclient (Debian's python3-blazarclient, its Python API on a
keystoneauth session with a fixed endpoint and token) against a running
`climate serve --auth tokens`.

usage: blazarclient_check.py URL ADMIN_TOKEN MEMBER_TOKEN OTHER_PROJECT_TOKEN

Prints one line per check and a closing "N passed, M failed"; exits non-zero on failure.
"""
import argparse
import datetime
import logging
import sys
import time

from keystoneauth1 import session as ks_session
from keystoneauth1 import token_endpoint

from blazarclient import client as blazar_client
from blazarclient import exception
from blazarclient.v1.shell_commands import floatingips as fip_commands
from blazarclient.v1.shell_commands import leases as lease_commands

url, admin_token, member_token, other_token = sys.argv[1:5]


def connect(token):
    """A client as the README shows it: a keystoneauth session, Climate's /v1 endpoint."""
    return blazar_client.Client(1, session=ks_session.Session(auth=token_endpoint.Token(url + "/v1", token)))


admin, member, other, stranger = connect(admin_token), connect(member_token), connect(other_token), connect("not-a-token")

passed, failed = 0, 0


def check(name, cond, detail=""):
    global passed, failed
    if cond:
        passed += 1
        print("ok   " + name)
    else:
        failed += 1
        print("FAIL " + name + (": " + str(detail) if detail else ""))


def expect_error(name, code, text, fn, *args, **kwargs):
    try:
        fn(*args, **kwargs)
    except exception.BlazarClientException as e:
        msg = str(e)
        check(name, e.kwargs.get("code") == code and text in msg, "code=%s msg=%s" % (e.kwargs.get("code"), msg))
        return
    check(name, False, "no error raised")


def api_date(dt):
    return dt.strftime("%Y-%m-%d %H:%M")


# Hosts (admin only).
h1 = admin.host.create("node-1", gpu="true", rack="r1", vcpus="32")
h2 = admin.host.create("node-2", gpu="false", rack="r1")
h3 = admin.host.create("node-3", gpu="true", rack="r2")
check("host create returns numeric ids", all(h["id"].isdigit() for h in (h1, h2, h3)), [h1, h2, h3])
check("host extra capabilities are flattened", h1.get("gpu") == "true" and h1.get("rack") == "r1", h1)
check("host list", sorted(h["hypervisor_hostname"] for h in admin.host.list()) == ["node-1", "node-2", "node-3"])
check("host show", admin.host.get(h2["id"])["hypervisor_hostname"] == "node-2")
updated = admin.host.update(h3["id"], {"rack": "r3"})
check("host update", updated["rack"] == "r3", updated)
props = admin.host.list_properties(detail=True)
gpu = [p for p in props if p["property"] == "gpu"]
check("property list with values", gpu and sorted(gpu[0]["property_values"]) == ["false", "true"], props)
admin.host.set_property("rack", private=True)
check("property set private", [p for p in admin.host.list_properties(detail=True, all=True) if p["property"] == "rack"][0]["private"] is True)
admin.host.set_property("rack", private=False)
expect_error("member cannot list hosts", 403, "Policy doesn't allow blazar:oshosts:get", member.host.list)
expect_error("unknown host", 404, "not found", admin.host.get, "999")
expect_error("bad token is refused", 401, "authentication", stranger.lease.list)
expect_error("long extra capability key", 400, "Extra capability key too long", admin.host.create, "node-x", **{"k" * 65: "v"})

# Leases with physical:host reservations (as a project member).
tomorrow = datetime.datetime.utcnow().replace(second=0, microsecond=0) + datetime.timedelta(days=1)
res = {"resource_type": "physical:host", "min": 1, "max": 2,
       "hypervisor_properties": "", "resource_properties": '["==", "$gpu", "true"]'}
lease = member.lease.create("gpu-lease", api_date(tomorrow), api_date(tomorrow + datetime.timedelta(hours=4)), [res], [])
check("lease create", lease["status"] == "PENDING" and lease["name"] == "gpu-lease", lease)
check("lease dates in Blazar's format", lease["start_date"] == tomorrow.strftime("%Y-%m-%dT%H:%M:%S.%f"), lease["start_date"])
check("lease has start, end and before_end events",
      sorted(e["event_type"] for e in lease["events"]) == ["before_end_lease", "end_lease", "start_lease"], lease["events"])
rid = lease["reservations"][0]["id"]
check("reservation shape", lease["reservations"][0]["min"] == 1 and lease["reservations"][0]["max"] == 2
      and lease["reservations"][0]["status"] == "pending", lease["reservations"])
check("lease show", member.lease.get(lease["id"])["id"] == lease["id"])
check("lease list", [l["id"] for l in member.lease.list()] == [lease["id"]])
check("other project does not see the lease", other.lease.list() == [])
expect_error("other project cannot show the lease", 404, "not found", other.lease.get, lease["id"])
expect_error("other project cannot delete the lease", 404, "not found", other.lease.delete, lease["id"])

allocs = admin.host.request_manager.get("/os-hosts/allocations")[1]["allocations"]
held = sorted(a["resource_id"] for a in allocs if a["reservations"])
check("allocations list the two gpu hosts", held == sorted([h1["id"], h3["id"]]), allocs)
by_lease = admin.host.request_manager.get("/os-hosts/allocations?lease_id=" + lease["id"])[1]["allocations"]
check("allocations filtered by lease", sum(len(a["reservations"]) for a in by_lease) == 2, by_lease)
one = admin.host.request_manager.get("/os-hosts/%s/allocation" % h1["id"])[1]["allocation"]
check("one host's allocation", one["reservations"][0]["lease_id"] == lease["id"], one)
expect_error("host with a future reservation cannot be deleted", 409, "The host is reserved", admin.host.delete, h1["id"])

# No capacity: both gpu hosts are taken in that window.
expect_error("no capacity is a 409 that explains", 409, "Not enough hosts available",
             member.lease.create, "too-many", api_date(tomorrow), api_date(tomorrow + datetime.timedelta(hours=1)),
             [dict(res, min=1, max=1)], [])
expect_error("unknown property", 400, "Unknown property", member.lease.create, "typo", api_date(tomorrow),
             api_date(tomorrow + datetime.timedelta(hours=1)), [dict(res, resource_properties='["==", "$gpux", "true"]')], [])
expect_error("malformed query", 400, "Malformed requirements", member.lease.create, "bad", api_date(tomorrow),
             api_date(tomorrow + datetime.timedelta(hours=1)), [dict(res, resource_properties='["==", "gpu"]')], [])
expect_error("bad date", 400, "is an invalid date", member.lease.create, "bad-date", "Bogus-date 13:13",
             api_date(tomorrow), [res], [])
expect_error("end before start", 400, "End date must be later than start date", member.lease.create, "backwards",
             api_date(tomorrow), api_date(tomorrow - datetime.timedelta(hours=1)), [res], [])
expect_error("min above max", 400, "Max must be equal to or larger than min", member.lease.create, "range",
             api_date(tomorrow), api_date(tomorrow + datetime.timedelta(hours=1)), [dict(res, min=3, max=2)], [])
expect_error("unknown lease", 404, "not found", member.lease.get, "00000000-0000-0000-0000-000000000000")

# Updates through the client's relative flags (they parse our date format).
moved = member.lease.update(lease["id"], prolong_for="2h")
check("update --prolong-for", moved["end_date"] == (tomorrow + datetime.timedelta(hours=6)).strftime("%Y-%m-%dT%H:%M:%S.%f"), moved)
moved = member.lease.update(lease["id"], defer_by="1h")
check("update --defer-by", moved["start_date"] == (tomorrow + datetime.timedelta(hours=1)).strftime("%Y-%m-%dT%H:%M:%S.%f"), moved)
renamed = member.lease.update(lease["id"], name="renamed")
check("update name", renamed["name"] == "renamed")
shrunk = member.lease.update(lease["id"], reservations=[{"id": rid, "max": 1}])
check("update reservation max", shrunk["reservations"][0]["max"] == 1, shrunk)
one_host = admin.host.request_manager.get("/os-hosts/allocations?reservation_id=" + rid)[1]["allocations"]
check("shrunk reservation holds one host", sum(len(a["reservations"]) for a in one_host) == 1, one_host)
expect_error("update with unknown reservation id", 400, "Please enter valid reservation IDs", member.lease.update,
             lease["id"], reservations=[{"id": "nope", "max": 1}])

# A lease that starts now goes ACTIVE within seconds (no 10-second polling).
now_lease = member.lease.create("now-lease", "now", api_date(tomorrow), [dict(res, resource_properties="", min=1, max=1)], [])
deadline = time.time() + 10
status = now_lease["status"]
while status != "ACTIVE" and time.time() < deadline:
    time.sleep(0.1)
    status = member.lease.get(now_lease["id"])["status"]
check("lease starting now becomes ACTIVE", status == "ACTIVE", status)
active = member.lease.get(now_lease["id"])
check("active reservation and start event", active["reservations"][0]["status"] == "active" and
      [e for e in active["events"] if e["event_type"] == "start_lease"][0]["status"] == "DONE", active)

# Delete.
member.lease.delete(lease["id"])
member.lease.delete(now_lease["id"])
check("lease delete", member.lease.list() == [])
expect_error("deleted lease is gone", 404, "not found", member.lease.get, lease["id"])
admin.host.delete(h1["id"])
check("host delete", h1["id"] not in [h["id"] for h in admin.host.list()])

# Floating IPs (the inventory). `openstack reservation floatingip create NETWORK ADDRESS`
# turns its arguments into keyword arguments with CreateFloatingIP.args2body, then calls
# floatingip.create(**body): the same here, without the keystone session.
body = fip_commands.CreateFloatingIP.args2body(
    None, argparse.Namespace(network_id="ext-net", floating_ip_address="172.24.4.101"))
fip = admin.floatingip.create(**body)
check("floating IP create", fip["floating_network_id"] == "ext-net" and fip["floating_ip_address"] == "172.24.4.101"
      and fip["reservable"] is True and fip["id"], fip)
check("floating IP has Blazar's keys", sorted(fip) == sorted(["id", "floating_network_id", "subnet_id", "floating_ip_address",
                                                               "reservable", "created_at", "updated_at"]), sorted(fip))
fip6 = admin.floatingip.create("ext-net", "2001:DB8::10", subnet_id="ext-v6")
check("floating IP create IPv6 with a subnet", fip6["floating_ip_address"] == "2001:db8::10" and fip6["subnet_id"] == "ext-v6", fip6)
listed = member.floatingip.list(sort_by="floating_ip_address")
check("floating IP list (members read the inventory)", [f["floating_ip_address"] for f in listed] == ["172.24.4.101", "2001:db8::10"], listed)
check("floating IP show", member.floatingip.get(fip["id"]) == fip, member.floatingip.get(fip["id"]))
# Leases of floating IPs, as `openstack reservation lease create --reservation
# resource_type=virtual:floatingip,network_id=ext-net,amount=1,required_floatingips=[...]`
# sends them (ints as numbers, the list JSON-decoded).
fres = {"resource_type": "virtual:floatingip", "network_id": "ext-net", "amount": 1, "required_floatingips": ["172.24.4.101"]}
flease = member.lease.create("fip-lease", api_date(tomorrow), api_date(tomorrow + datetime.timedelta(hours=2)), [fres], [])
fr = flease["reservations"][0]
check("floating IP lease create", flease["status"] == "PENDING" and fr["resource_type"] == "virtual:floatingip"
      and fr["network_id"] == "ext-net" and fr["amount"] == 1 and fr["required_floatingips"] == ["172.24.4.101"]
      and "min" not in fr, flease)
expect_error("the same address twice in a window", 409, "Not enough floating IPs available", member.lease.create,
             "fip-again", api_date(tomorrow + datetime.timedelta(hours=1)), api_date(tomorrow + datetime.timedelta(hours=3)), [fres], [])
expect_error("an address of another network", 400, "is not a registered floating IP of network other-net", member.lease.create,
             "fip-other", api_date(tomorrow), api_date(tomorrow + datetime.timedelta(hours=1)),
             [dict(fres, network_id="other-net")], [])
expect_error("a malformed required address", 400, "is invalid form", member.lease.create,
             "fip-bad", api_date(tomorrow), api_date(tomorrow + datetime.timedelta(hours=1)),
             [dict(fres, required_floatingips=["172.24.4.300"])], [])
expect_error("a reserved floating IP cannot be deleted", 409, "cannot be deleted", admin.floatingip.delete, fip["id"])
grown = member.lease.update(flease["id"], reservations=[{"id": fr["id"], "amount": 2}])
check("floating IP reservation amount update", grown["reservations"][0]["amount"] == 2, grown)
member.lease.delete(flease["id"])
expect_error("duplicate floating IP is a 409", 409, "already registered on network ext-net", admin.floatingip.create,
             "ext-net", "172.24.4.101")
expect_error("malformed floating IP address", 400, "is not an IPv4 or IPv6 address", admin.floatingip.create, "ext-net", "300.1.1.1")
expect_error("member cannot create floating IPs", 403, "blazar:floatingips:post", member.floatingip.create, "ext-net", "172.24.4.102")
expect_error("member cannot delete floating IPs", 403, "blazar:floatingips:delete", member.floatingip.delete, fip["id"])
admin.floatingip.delete(fip["id"])
admin.floatingip.delete(fip6["id"])
check("floating IP delete", admin.floatingip.list() == [])
expect_error("deleted floating IP is gone", 404, "not found", admin.floatingip.get, fip["id"])
expect_error("unknown floating IP", 404, "Object with {'floatingip_id': 'nope'} not found", admin.floatingip.delete, "nope")

# Instance slots, as `openstack reservation lease create --reservation
# resource_type=virtual:instance,amount=…,vcpus=…,…` sends them: the client's own parser
# (ints as numbers, affinity as the string given, missing keys as its defaults).
parser = lease_commands.CreateLease.__new__(lease_commands.CreateLease)
parser.log = logging.getLogger("blazarclient")


def instance_reservation(text):
    return parser._parse_params(text, lease_commands.CREATE_RESERVATION_KEYS["virtual:instance"], "invalid")


s1 = admin.host.create("slots-1", vcpus="8", memory_mb="16384", local_gb="100")
s2 = admin.host.create("slots-2", vcpus="8", memory_mb="16384", local_gb="100")
later = tomorrow + datetime.timedelta(days=2)
ires = instance_reservation("resource_type=virtual:instance,amount=4,vcpus=2,memory_mb=2048,disk_gb=10,affinity=False")
check("the client sends affinity as a string", ires["affinity"] == "False" and ires["amount"] == 4, ires)
expect_error("anti-affinity needs distinct hosts", 409, "on distinct hosts (anti-affinity)", member.lease.create,
             "spread", api_date(later), api_date(later + datetime.timedelta(hours=2)), [ires], [])
ires["amount"] = 2
ilease = member.lease.create("spread", api_date(later), api_date(later + datetime.timedelta(hours=2)), [ires], [])
ir = ilease["reservations"][0]
check("instance lease create", ilease["status"] == "PENDING" and ir["resource_type"] == "virtual:instance"
      and ir["vcpus"] == 2 and ir["memory_mb"] == 2048 and ir["disk_gb"] == 10 and ir["amount"] == 2
      and ir["affinity"] is False and ir["flavor_id"] == ir["id"] and ir["server_group_id"] and "aggregate_id" in ir
      and "min" not in ir, ilease)
packed = member.lease.create("pack", api_date(later), api_date(later + datetime.timedelta(hours=2)),
                             [instance_reservation("resource_type=virtual:instance,amount=6,vcpus=2,memory_mb=2048,disk_gb=10,affinity=None")], [])
check("affinity None packs (no server group)", packed["reservations"][0]["affinity"] is None
      and packed["reservations"][0]["server_group_id"] is None, packed["reservations"][0])
expect_error("slots beyond every host's capacity", 409, "Not enough hosts available", member.lease.create,
             "full", api_date(later), api_date(later + datetime.timedelta(hours=1)),
             [instance_reservation("resource_type=virtual:instance,amount=1,vcpus=2,memory_mb=2048,disk_gb=10")], [])
expect_error("a size left out is Blazar's empty default", 400, "Malformed parameter disk_gb", member.lease.create,
             "nodisk", api_date(later), api_date(later + datetime.timedelta(hours=1)),
             [instance_reservation("resource_type=virtual:instance,amount=1,vcpus=2,memory_mb=2048")], [])
expect_error("an affinity Blazar refuses", 400, "Malformed parameter affinity", member.lease.create,
             "maybe", api_date(later), api_date(later + datetime.timedelta(hours=1)),
             [instance_reservation("resource_type=virtual:instance,amount=1,vcpus=1,memory_mb=512,disk_gb=0,affinity=maybe")], [])
slot_allocs = admin.host.request_manager.get("/os-hosts/allocations?lease_id=" + packed["id"])[1]["allocations"]
check("allocations count a reservation's slots per host",
      sum(r["slots"] for a in slot_allocs for r in a["reservations"]) == 6, slot_allocs)
smaller = member.lease.update(packed["id"], reservations=[{"id": packed["reservations"][0]["id"], "amount": 4}])
check("instance reservation amount update", smaller["reservations"][0]["amount"] == 4, smaller)

# flavor:instance through the Python API (this client's CLI parser has no keys for it),
# with a flavor registered on Climate's /v1/flavors; the flavor id goes out as a number.
admin.host.request_manager.post("/flavors", body={"id": "42", "name": "m1.small", "vcpus": 1, "ram": 1024, "disk": 10})
flav = member.lease.create("flavored", api_date(later + datetime.timedelta(hours=3)), api_date(later + datetime.timedelta(hours=4)),
                           [{"resource_type": "flavor:instance", "flavor_id": 42, "amount": 3, "affinity": None, "resource_properties": ""}], [])
fr2 = flav["reservations"][0]
check("flavor lease create", fr2["resource_type"] == "flavor:instance" and fr2["vcpus"] == 1 and fr2["memory_mb"] == 1024
      and '"name":"m1.small"' in fr2["resource_properties"], fr2)
expect_error("unknown flavor", 400, 'Invalid flavor_id "nope"', member.lease.create, "noflavor", api_date(later),
             api_date(later + datetime.timedelta(hours=1)), [{"resource_type": "flavor:instance", "flavor_id": "nope", "amount": 1}], [])
for l in (ilease, packed, flav):
    member.lease.delete(l["id"])

# Climate's lease types: a retry lease that does not fit waits; Blazar's client shows its
# status as it is (the client has no lease_type argument: the body goes through its
# request manager, as any extension would).
resp, body = member.lease.request_manager.post("/leases", body={
    "name": "waits", "start_date": api_date(later), "end_date": api_date(later + datetime.timedelta(hours=1)),
    "lease_type": "retry", "reservations": [{"resource_type": "physical:host", "min": 40, "max": 40,
                                              "hypervisor_properties": "", "resource_properties": ""}], "events": []})
waits = body["lease"]
check("a retry lease that does not fit waits", waits["status"] == "WAITING" and waits["lease_type"] == "retry", waits)
check("the client shows the WAITING status", member.lease.get(waits["id"])["status"] == "WAITING"
      and "WAITING" in [l["status"] for l in member.lease.list()])
member.lease.delete(waits["id"])

print("%d passed, %d failed" % (passed, failed))
sys.exit(1 if failed else 0)
