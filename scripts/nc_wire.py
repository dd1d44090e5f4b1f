# SPDX-License-Identifier: BSD-3-Clause
"""The control protocol's messages (include/nc_proto.h), for every Python test and script.

Only the layouts and constants live here: each struct mirrors one of nc_proto.h, whose
_Static_asserts fix the sizes checked below. Ctl speaks the protocol over a connection.
"""
import json
import os
import socket
import struct

MAGIC = 0x6e63                          # NC_CTL_MAGIC
CONTROL_PROTOCOL_VERSION = 7            # NC_CONTROL_PROTOCOL_VERSION: the newest
CONTROL_PROTOCOL_MIN = 4                # NC_CONTROL_PROTOCOL_MIN: the oldest the daemon speaks
BUILD_SIZE = 128                        # NC_BUILD_SIZE
(HELLO, CREATE, ATTACH, DESTROY, LIST, STATS, CLI, CHAN_STATS,
 EVENTFD, CLIENT_EVENTFD, METER) = range(1, 12)  # enum nc_ctl_type
DELIVER, DROP, NAT = 0, 1, 2            # enum nc_dir_action
CREATE_F_TX, CREATE_F_METER, CREATE_F_SHARED = 0x1, 0x2, 0x4  # NC_CREATE_F_*
METER_F_BITS, METER_F_EXCEED_KERNEL, METER_F_RFC4115 = 0x1, 0x2, 0x4  # NC_METER_F_*
HELLO_F_ZEROCOPY, HELLO_F_CONTROL, HELLO_F_ONE_RING = 0x1, 0x2, 0x4  # NC_HELLO_F_*
CHANNEL_F_REGION, CHANNEL_F_TX = 0x1, 0x2     # NC_CHANNEL_F_*
CLI_F_JSON = 0x1                        # NC_CLI_F_JSON
NAT_F_DST, NAT_F_DPORT, NAT_F_SRC, NAT_F_SPORT = 0x1, 0x2, 0x4, 0x8
NAT_F_PORT, NAT_F_VIA, NAT_F_REVERSE = 0x10, 0x20, 0x40
PORT_ANY, PORT_RANGE, PORT_MASK = 0, 1, 2  # nc_trie_port kinds

REQ = struct.Struct("<HHIII")           # struct nc_ctl_req: magic, type, id, len, reserved
REP = struct.Struct("<HHIiI")           # struct nc_ctl_rep: magic, type, for_id, status, len
HELLO_V4 = struct.Struct("<IIII")       # version 4's HELLO: version, pid, flags, 0
HELLO_BODY = struct.Struct("<IIII128s")  # struct nc_ctl_hello: version, pid, flags, min_version,
                                         # build
HELLO_REPLY_V4 = struct.Struct("<II64s32sIIQ")  # version 4's reply: version, lcore, file_prefix,
                                                # pool, slot, flags, region_size
HELLO_REPLY = struct.Struct("<II64s32sIIQIIII128s")  # struct nc_ctl_hello_reply: version 4's,
                                     # then min_version, max_version, region_layout, 0, build
RULE = struct.Struct("<BBBBBBBB16s16sHHHHI")  # struct nc_ctl_rule
CREATE_BODY = struct.Struct("<32s52sIIIQIHH")  # struct nc_ctl_create
NAT_BODY = struct.Struct("<IB6sBHHHH16s16s")   # struct nc_ctl_nat
CHANNEL = struct.Struct("<IIQ32s32s32sII6sH")  # struct nc_ctl_channel
NAME = struct.Struct("<32s")                   # struct nc_ctl_name
ID = struct.Struct("<I")                       # struct nc_ctl_id
METER_BODY = struct.Struct("<IIQQQQQ")          # struct nc_ctl_meter
CLI_HEAD = struct.Struct("<I")                 # struct nc_ctl_cli: flags, then the line
# struct nc_ctl_channel_stats: NC_CHANNEL_STATS (nc_common.h), in its order
CHANNEL_STATS_FIELDS = ("hits", "delivered", "bytes", "drop_ring_full", "drop_queue_bytes",
                        "dropped", "tx", "tx_bytes", "tx_dropped", "tx_spoofed", "tx_malformed",
                        "tx_no_route", "tx_no_neigh", "tx_ring_full", "rx_count", "tx_count",
                        "drop_no_buf")
CHANNEL_STATS = struct.Struct("<" + "Q" * 14 + "II" + "Q")

assert (REQ.size, REP.size, RULE.size, CREATE_BODY.size, NAT_BODY.size, CHANNEL.size,
        HELLO_V4.size, HELLO_BODY.size, HELLO_REPLY_V4.size, HELLO_REPLY.size) == \
    (16, 16, 52, 112, 52, 128, 16, 144, 120, 264), "nc_proto.h's layouts"


def hello_body(version=CONTROL_PROTOCOL_VERSION, flags=0, min_version=CONTROL_PROTOCOL_MIN,
               build=b"nc_wire.py"):
    """A HELLO's body (version 5's): flags 0 asks for an isolated client's region. A
    version 4 HELLO is HELLO_V4.pack(4, pid, flags, 0)."""
    return HELLO_BODY.pack(version, os.getpid(), flags, min_version, build)


def request(type_, body=b"", id_=1):
    """One request datagram."""
    return REQ.pack(MAGIC, type_, id_, len(body), 0) + body


def rule(family=0, proto=17, proto_mask=0xff, dst=b"", dst_len=0, src=b"", src_len=0,
         dport=None, dport_mask=None, sport=None, priority=0):
    """A struct nc_ctl_rule: dport exact (or value/mask with dport_mask), sport exact."""
    dk, dlo, dhi = PORT_ANY, 0, 0
    if dport is not None:
        dk, dlo, dhi = (PORT_MASK, dport, dport_mask) if dport_mask is not None else \
            (PORT_RANGE, dport, dport)
    sk, slo, shi = (PORT_RANGE, sport, sport) if sport is not None else (PORT_ANY, 0, 0)
    return RULE.pack(family, proto, proto_mask, dst_len, src_len, dk, sk, 0, dst, src,
                     dlo, dhi, slo, shi, priority)


def create_body(name, rule_, action=DELIVER, ring_size=0, order=0, queue_bytes=0, flags=0,
                port=0, reserved=0):
    """A CHANNEL_CREATE body, without the NAT part."""
    return CREATE_BODY.pack(name.encode(), rule_, action, ring_size, order, queue_bytes, flags,
                            port, reserved)


def nat_body(flags=NAT_F_DST | NAT_F_DPORT, family=4, dst=b"", src=b"", dport=0, sport=0,
             port=0, via=b"", reserved=0, reserved2=0):
    """The struct nc_ctl_nat that follows a NAT channel's CHANNEL_CREATE body."""
    return NAT_BODY.pack(flags, family, via, reserved, dport, sport, port, reserved2, dst, src)


class Ctl:
    """A connection to the control socket."""

    def __init__(self, path, timeout=10):
        self.path, self.timeout, self._s = path, timeout, None
        self.next_id = 1

    @property
    def s(self):
        """The socket, connected on first use: the daemon closes a connection that says no
        HELLO within control.hello_timeout_ms, and a test may set one up well before."""
        if self._s is None:
            self._s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
            self._s.settimeout(self.timeout)
            self._s.connect(self.path)
        return self._s

    def send(self, type_, body=b"", raw=None):
        self.next_id += 1
        self.s.send(raw if raw is not None else request(type_, body, self.next_id))

    def recv(self):
        try:
            data = self.s.recv(1 << 20)
        except ConnectionResetError:
            # A daemon that refused us as it accepted us and closed before it read our
            # request: the reset comes first, its reason is still queued behind it.
            self.s.setblocking(False)
            try:
                data = self.s.recv(1 << 20)
            except BlockingIOError:
                raise ConnectionResetError("reset, and nothing queued") from None
            finally:
                self.s.settimeout(self.timeout)
        if not data:
            raise ConnectionError("closed")
        magic, _, for_id, status, length = REP.unpack(data[:REP.size])
        assert magic == MAGIC and length == len(data) - REP.size, data[:REP.size]
        return status, for_id, data[REP.size:]

    def call(self, type_, body=b""):
        self.send(type_, body)
        status, for_id, body = self.recv()
        assert for_id == self.next_id, (for_id, self.next_id)
        return status, body

    def call_fds(self, type_, body=b""):
        """A request whose reply may carry file descriptors: (status, body, fds)."""
        self.send(type_, body)
        data, fds, _, _ = socket.recv_fds(self.s, 1 << 20, 4)
        magic, _, for_id, status, length = REP.unpack(data[:REP.size])
        assert magic == MAGIC and for_id == self.next_id and length == len(data) - REP.size
        return status, data[REP.size:], fds

    def daemon_build(self):
        """The daemon's build (show version), which a zero-copy HELLO must name: asked on a
        connection of its own."""
        c = Ctl(self.path, self.timeout)
        try:
            assert c.hello(flags=HELLO_F_CONTROL)[0] == 0
            return c.json_cli("show version")["build"].encode()
        finally:
            c.close()

    def hello(self, version=CONTROL_PROTOCOL_VERSION, flags=None, build=None,
              min_version=CONTROL_PROTOCOL_MIN):
        """HELLO; root is a zero-copy client unless flags say otherwise, others isolated. A
        zero-copy one names the daemon's build unless build says otherwise."""
        if flags is None:
            flags = HELLO_F_ZEROCOPY if os.getuid() == 0 else 0
        if build is None:
            build = self.daemon_build() if flags & HELLO_F_ZEROCOPY else b"nc_wire.py"
        status, body = self.call(HELLO, hello_body(version, flags, min_version, build))
        self.reason = body.decode(errors="replace") if status < 0 else ""
        if status == 0:
            v, lcore, prefix, pool, self.slot, _, self.region_size = \
                HELLO_REPLY_V4.unpack(body[:HELLO_REPLY_V4.size])
            return status, (v, lcore, prefix.rstrip(b"\0").decode(), pool.rstrip(b"\0").decode())
        return status, None

    def json_cli(self, line):
        """A CLI command's JSON output."""
        status, body = self.cli(line, CLI_F_JSON)
        assert status == 0, (status, body)
        return json.loads(body)

    def create(self, name, rule_, **kw):
        status, rep = self.call(CREATE, create_body(name, rule_, **kw))
        if status == 0:
            cid, ring = CHANNEL.unpack(rep)[0], CHANNEL.unpack(rep)[4]
            return status, (cid, ring.rstrip(b"\0").decode())
        return status, None

    def cli(self, line, flags=0):
        return self.call(CLI, CLI_HEAD.pack(flags) + line.encode())

    def json(self, type_):
        status, body = self.call(type_)
        assert status == 0, status
        return json.loads(body)

    def close(self):
        if self._s is not None:
            self._s.close()
