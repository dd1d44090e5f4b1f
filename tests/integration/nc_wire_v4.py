# SPDX-License-Identifier: BSD-3-Clause
"""Control protocol 4 and region layout 1, frozen as commit 03b9eb9 defined them (its
include/nc_ctl.h, nc_region.h), for the tests that play the previous version: a client that
speaks only it (OldRegion, hello), and a daemon that speaks only it (OldDaemon).

Nothing here follows the current headers: that is the point.
"""
import mmap
import os
import socket
import struct
import threading

MAGIC, VERSION = 0x6e63, 4
HELLO, CREATE, ATTACH, DESTROY, LIST, STATS, CLI, CHAN_STATS, EVENTFD, CLIENT_EVENTFD = \
    range(1, 11)
HELLO_F_ZEROCOPY, HELLO_F_CONTROL, HELLO_F_ONE_RING = 0x1, 0x2, 0x4
CREATE_F_TX = 0x1
CHANNEL_F_REGION, CHANNEL_F_TX = 0x1, 0x2
REGION_MAGIC, REGION_VERSION, REGION_HDR_SIZE = 0x6e637267, 1, 4096

REQ = struct.Struct("<HHIII")              # magic, type, id, len, reserved
REP = struct.Struct("<HHIiI")              # magic, type, for_id, status, len
HELLO_BODY = struct.Struct("<IIII")        # version, pid, flags, reserved
HELLO_REPLY = struct.Struct("<II64s32sIIQ")  # version, lcore, prefix, pool, slot, flags, size
RULE = struct.Struct("<BBBBBBBB16s16sHHHHI")
CREATE_BODY = struct.Struct("<32s52sIIIQIHH")  # name, rule, action, ring, order, bytes, flags,
                                               # port, reserved
CHANNEL = struct.Struct("<IIQ32s32s32sII6sH")  # id, action, generation, name, rx, tx,
                                               # region_ring, flags, tx_mac, reserved
ID = struct.Struct("<I")
STATS_BODY = struct.Struct("<" + "Q" * 14 + "II" + "Q")   # struct nc_ctl_channel_stats
# struct nc_region_hdr of layout 1: magic, version, size, nrx, rx_size, tx_size, free_size,
# buf_size, rx_bufs, rx_off, rx_stride, tx_off, free_off, buf_off, tx_buf_off, reserved
REGION_HDR = struct.Struct("<IIQIIIIIIQQQQQQ40s")
DESC = struct.Struct("<IIII")              # offset, length, channel, flags
# struct nc_region_ring: head, channel, generation at 0, 4, 8; tail, want_wakeup at 64, 68;
# its descriptors from 128.
RING_HEAD, RING_CHANNEL, RING_GEN, RING_TAIL, RING_DESC = 0, 4, 8, 64, 128
assert (HELLO_BODY.size, HELLO_REPLY.size, CREATE_BODY.size, CHANNEL.size, STATS_BODY.size,
        REGION_HDR.size) == (16, 120, 112, 128, 128, 128)


def request(type_, body, id_):
    return REQ.pack(MAGIC, type_, id_, len(body), 0) + body


def udp_rule(dport):
    """A rule for UDP to port dport, any address (kind 1: a range)."""
    return RULE.pack(0, 17, 0xff, 0, 0, 1, 0, 0, b"", b"", dport, dport, 0, 0, 0)


class Region:
    """A region of layout 1: one part, every offset from its start, each ring's tail its own."""

    def __init__(self, fd, size):
        self.m = mmap.mmap(fd, size, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
        (self.magic, self.version, self.size, self.nrx, self.rx_size, self.tx_size,
         self.free_size, self.buf_size, self.rx_bufs, self.rx_off, self.rx_stride, self.tx_off,
         self.free_off, self.buf_off, self.tx_buf_off, _) = REGION_HDR.unpack_from(self.m, 0)

    def u32(self, off, value=None):
        if value is None:
            return struct.unpack_from("<I", self.m, off)[0]
        struct.pack_into("<I", self.m, off, value & 0xffffffff)

    def rx_ring(self, k):
        return self.rx_off + k * self.rx_stride

    def take(self, ring, size):
        """The next descriptor a ring's producer put there, consumed, or None."""
        tail = self.u32(ring + RING_TAIL)
        if self.u32(ring + RING_HEAD) == tail:
            return None
        d = DESC.unpack_from(self.m, ring + RING_DESC + (tail % size) * DESC.size)
        self.u32(ring + RING_TAIL, tail + 1)
        return d

    def put(self, ring, size, desc):
        """A descriptor produced on a ring."""
        head = self.u32(ring + RING_HEAD)
        DESC.pack_into(self.m, ring + RING_DESC + (head % size) * DESC.size, *desc)
        self.u32(ring + RING_HEAD, head + 1)

    def frame(self, off, length):
        return bytes(self.m[off:off + length])


class Client:
    """A client that speaks control protocol 4 only, as a library of 03b9eb9 did."""

    def __init__(self, path):
        self.s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self.s.settimeout(10)
        self.s.connect(path)
        self.id = 0

    def call(self, type_, body=b""):
        """(status, body, fds) of one request."""
        self.id += 1
        self.s.send(request(type_, body, self.id))
        data, fds, _, _ = socket.recv_fds(self.s, 65536, 4)
        magic, _, for_id, status, length = REP.unpack(data[:REP.size])
        assert magic == MAGIC and for_id == self.id and length == len(data) - REP.size
        return status, data[REP.size:], fds

    def hello(self, flags=0):
        return self.call(HELLO, HELLO_BODY.pack(VERSION, os.getpid(), flags, 0))

    def close(self):
        self.s.close()


class OldDaemon(threading.Thread):
    """A daemon that speaks control protocol 4 only, as netchanneld of 03b9eb9 did, for one
    connection: a HELLO of another length is -EINVAL, of another version -EPROTO (no reason
    with either); an isolated client gets a region of layout 1. Its one channel (id 7) has
    ring 0 of the region, with `frame` on it from the start; what the client transmits is
    kept in `sent`, and the counters it reports are `stats`."""

    def __init__(self, path, frame, stats):
        super().__init__(daemon=True)
        self.path, self.frame, self.stats = path, frame, stats
        self.hellos, self.sent, self.types = [], [], []
        self.ls = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self.ls.bind(path)
        self.ls.listen(4)
        self.region = None
        self.stop = threading.Event()

    def make_region(self):
        nrx, rx_size, tx_size, nbufs, buf = 64, 64, 64, 64, 2048
        stride = 128 + rx_size * 16
        rx_off = REGION_HDR_SIZE
        tx_off = rx_off + nrx * stride
        free_off = tx_off + 128 + tx_size * 16
        buf_off = (free_off + 128 + nbufs * 16 + 4095) // 4096 * 4096
        tx_buf_off = buf_off + nbufs * buf
        size = (tx_buf_off + tx_size * buf + 4095) // 4096 * 4096
        fd = os.memfd_create("old-region")
        os.ftruncate(fd, size)
        m = mmap.mmap(fd, size, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
        REGION_HDR.pack_into(m, 0, REGION_MAGIC, REGION_VERSION, size, nrx, rx_size, tx_size,
                             nbufs, buf, nbufs, rx_off, stride, tx_off, free_off, buf_off,
                             tx_buf_off, b"")
        for k in range(nrx):
            struct.pack_into("<I", m, rx_off + k * stride + RING_CHANNEL, 0xffffffff)
        m.close()
        self.region = Region(fd, size)
        return fd, size

    def reply(self, c, type_, id_, status, body=b"", fds=()):
        socket.send_fds(c, [REP.pack(MAGIC, type_, id_, status, len(body)) + body], list(fds))

    def handle(self, c, type_, id_, body):
        self.types.append(type_)
        g = self.region
        if type_ == HELLO:
            self.hellos.append(len(body))
            if len(body) != HELLO_BODY.size:
                return self.reply(c, type_, id_, -22)          # EINVAL, as ctl_check had it
            version, _, flags, _ = HELLO_BODY.unpack(body)
            if version != VERSION:
                return self.reply(c, type_, id_, -71)          # EPROTO
            fd, size = self.make_region() if flags in (0, HELLO_F_ONE_RING) else (-1, 0)
            rep = HELLO_REPLY.pack(VERSION, 64, b"old", b"nc_mbuf_0", 0, flags, size)
            self.reply(c, type_, id_, 0, rep, [fd] if fd >= 0 else [])
            if fd >= 0:
                os.close(fd)
        elif type_ == CREATE:
            ring = g.rx_ring(0)
            g.u32(ring + RING_GEN, 1)
            g.u32(ring + RING_CHANNEL, 7)
            g.m[g.buf_off:g.buf_off + len(self.frame)] = self.frame
            g.put(ring, g.rx_size, (g.buf_off, len(self.frame), 7, 0))
            self.reply(c, type_, id_, 0, CHANNEL.pack(
                7, 0, 1, b"c", b"", b"", 0, CHANNEL_F_REGION | CHANNEL_F_TX,
                bytes.fromhex("020000000001"), 0))
        elif type_ == CHAN_STATS:
            self.reply(c, type_, id_, 0, STATS_BODY.pack(*self.stats))
        elif type_ == EVENTFD:
            fd = os.eventfd(0, os.EFD_NONBLOCK)
            self.reply(c, type_, id_, 0, b"", [fd])
            os.close(fd)
        elif type_ == DESTROY:
            self.reply(c, type_, id_, 0)
        else:
            self.reply(c, type_, id_, -95)                     # EOPNOTSUPP

    def drain_tx(self):
        """The client's frames, off its tx ring."""
        g = self.region
        while g is not None:
            d = g.take(g.tx_off, g.tx_size)
            if d is None:
                return
            self.sent.append(g.frame(d[0], d[1]))

    def run(self):
        while not self.stop.is_set():
            self.ls.settimeout(0.1)
            try:
                c, _ = self.ls.accept()
            except socket.timeout:
                continue
            c.settimeout(0.02)
            while not self.stop.is_set():
                self.drain_tx()
                try:
                    data = c.recv(65536)
                except socket.timeout:
                    continue
                if not data:
                    break
                _, type_, id_, length, _ = REQ.unpack(data[:REQ.size])
                self.handle(c, type_, id_, data[REQ.size:])
            self.drain_tx()
            c.close()
        self.ls.close()
