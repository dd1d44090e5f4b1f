# SPDX-License-Identifier: BSD-3-Clause
"""A DNS zone and the configs of the authoritative servers that serve it on the test bed
(10.99.0.1), for test_preload.py and bench_apps.py (scripts/bench.sh apps)."""

# example.test, with an A and an AAAA for www.
ZONE = """$ORIGIN example.test.
$TTL 3600
@    SOA ns1 hostmaster 1 3600 600 86400 300
@    NS ns1
ns1  A 10.99.0.1
www  A 192.0.2.1
www  AAAA 2001:db8::1
"""

# knotd.conf: {d} its directory (the zone file in it), {listen} its ADDR@PORT list, {user}
# a "    user: U:G" line or nothing (an extra server option may follow it on that line).
KNOT_CONF = """server:
    rundir: "{d}"
    listen: [ {listen} ]
    udp-workers: 2
    tcp-workers: 1
    background-workers: 1
{user}
database:
    storage: "{d}/db"
zone:
  - domain: example.test
    storage: "{d}"
    file: "example.test.zone"
log:
  - target: stdout
    any: info
"""

# nsd.conf: {d} its directory, {port}, {reuse} yes or no; no response rate limit, which
# would drop a benchmark's queries.
NSD_CONF = """server:
    server-count: 2
    reuseport: {reuse}
    ip-address: 10.99.0.1
    port: {port}
    username: ""
    chroot: ""
    zonesdir: "{d}"
    pidfile: "{d}/nsd.pid"
    xfrdfile: "{d}/xfrd.state"
    xfrdir: "{d}"
    zonelistfile: "{d}/zone.list"
    database: ""
    rrl-ratelimit: 0
    verbosity: 1
remote-control:
    control-enable: no
zone:
    name: example.test
    zonefile: "example.test.zone"
"""
