# SPDX-License-Identifier: BSD-3-Clause
"""netchannel: netchanneld's channels from Python, over libnetchannel (ctypes).

An isolated client: no DPDK, no root, only permission on the daemon's control socket and a
control.allow entry. ::

    import netchannel
    with netchannel.Client() as c:
        ch = c.create("echo", dport=7, proto="udp", tx=True)
        frame = ch.recv(timeout=1.0)          # bytes, or None after the timeout
        ch.send_ip(reply)                     # an IP packet: the daemon adds the Ethernet header

A channel's fileno() is an eventfd for selectors and asyncio: arm() it, wait until it is
readable, then receive with timeout=0 until None (see examples/nc_echo.py).

A client with many channels connects with one_ring=True: all of them deliver on one ring,
which Client.recv() reads (each frame with its channel), and Client.fileno() and arm() wait
on. ::

    with netchannel.Client(one_ring=True) as c:
        for port in range(7000, 7100):
            c.create(f"p{port}", dport=port, tx=True)
        ch, frame = c.recv(timeout=1.0)       # or None after the timeout
"""
import ctypes
import errno
import ipaddress
import os
import time

__all__ = ["Client", "Channel", "NetchannelError", "DEFAULT_SOCKET"]

DEFAULT_SOCKET = "/run/netchanneld/netchanneld.sock"   # NC_DEFAULT_SOCKET
_CONNECT_CONTROL = 0x2                                 # NC_CONNECT_CONTROL
_CONNECT_ONE_RING = 0x8                                # NC_CONNECT_ONE_RING
_GONE = (errno.ESHUTDOWN, errno.EPIPE)                 # the daemon stopped, or died


class _Sized(ctypes.Structure):
    """A struct of netchannel.h that starts with its size ("Structs that grow"): made with
    it set to this layout's, so the library reads and writes no more."""

    def __init__(self, **kw):
        super().__init__(size=ctypes.sizeof(self), **kw)


class _Port(ctypes.Structure):
    """struct nc_port (netchannel.h)."""
    _fields_ = [("lo", ctypes.c_uint16), ("hi", ctypes.c_uint16), ("kind", ctypes.c_uint8),
                ("reserved", ctypes.c_uint8)]


class _Rule(_Sized):
    """struct nc_rule (netchannel.h)."""
    _fields_ = [("size", ctypes.c_uint32), ("family", ctypes.c_uint8),
                ("proto", ctypes.c_uint8), ("proto_mask", ctypes.c_uint8),
                ("dst_len", ctypes.c_uint8), ("src_len", ctypes.c_uint8),
                ("reserved", ctypes.c_uint8 * 3), ("dst", ctypes.c_uint8 * 16),
                ("src", ctypes.c_uint8 * 16), ("dport", _Port), ("sport", _Port),
                ("priority", ctypes.c_uint32)]


class _Meter(_Sized):
    """struct nc_meter_opts (netchannel.h)."""
    _fields_ = [("size", ctypes.c_uint32), ("flags", ctypes.c_uint32),
                ("rate", ctypes.c_uint64), ("burst", ctypes.c_uint64),
                ("excess_burst", ctypes.c_uint64), ("peak_rate", ctypes.c_uint64),
                ("peak_burst", ctypes.c_uint64)]


_METER_BITS, _METER_EXCEED_KERNEL, _METER_RFC4115 = 0x1, 0x2, 0x4
# The config's keys (docs/config.md, channels[].meter): in packets, or in bits and bytes.
_METER_KEYS = {
    "pps": ("rate", False), "burst": ("burst", False), "excess_burst": ("excess_burst", False),
    "peak_pps": ("peak_rate", False), "peak_burst": ("peak_burst", False),
    "bps": ("rate", True), "burst_bytes": ("burst", True),
    "excess_burst_bytes": ("excess_burst", True), "peak_bps": ("peak_rate", True),
    "peak_burst_bytes": ("peak_burst", True)}


def _meter(spec):
    """A meter dict with the config's keys as struct nc_meter_opts: ValueError for a key it
    does not have, or for both units at once. The daemon checks the rest, as the config's."""
    if not isinstance(spec, dict):
        raise TypeError(f"meter: a dict of the config's keys, not {type(spec).__name__}")
    m, units = _Meter(), set()
    for k, v in spec.items():
        if k == "mode":
            if v not in ("rfc2697", "rfc2698", "rfc4115"):
                raise ValueError(f"meter: mode {v!r}: expected rfc2697, rfc2698 or rfc4115")
            if v == "rfc4115":
                m.flags |= _METER_RFC4115
        elif k == "exceed":
            if v not in ("drop", "kernel"):
                raise ValueError(f"meter: exceed {v!r}: expected drop or kernel")
            if v == "kernel":
                m.flags |= _METER_EXCEED_KERNEL
        elif k == "eir":
            m.peak_rate = int(v)
        elif k in _METER_KEYS:
            field, bits = _METER_KEYS[k]
            units.add(bits)
            setattr(m, field, int(v))
        else:
            raise ValueError(f"meter: unknown key {k!r} (expected {', '.join(_METER_KEYS)}, "
                             "mode, eir, exceed)")
    if len(units) > 1:
        raise ValueError("meter: give it in packets (pps, burst...) or in bits and bytes "
                         "(bps, burst_bytes...), not both")
    if True in units:
        m.flags |= _METER_BITS
    return m


class _Opts(_Sized):
    """struct nc_channel_opts (netchannel.h)."""
    _fields_ = [("size", ctypes.c_uint32), ("drop", ctypes.c_int),
                ("ring_size", ctypes.c_uint32), ("memory_limit_order", ctypes.c_uint32),
                ("queue_bytes", ctypes.c_uint64), ("tx", ctypes.c_int),
                ("port", ctypes.c_uint16), ("reserved", ctypes.c_uint16),
                ("nat", ctypes.c_void_p), ("meter", ctypes.POINTER(_Meter)),
                ("shared", ctypes.c_int)]


class _Stats(_Sized):
    """struct nc_channel_stats (netchannel.h): its counters, NC_CHANNEL_STATS's order."""
    COUNTERS = ("hits", "delivered", "bytes", "drop_ring_full", "drop_queue_bytes", "dropped",
                "tx", "tx_bytes", "tx_dropped", "tx_spoofed", "tx_malformed", "tx_no_route",
                "tx_no_neigh", "tx_ring_full", "rx_count", "tx_count", "drop_no_buf")
    _fields_ = [("size", ctypes.c_uint32), ("reserved", ctypes.c_uint32)] + [
        (n, ctypes.c_uint32 if n in ("rx_count", "tx_count") else ctypes.c_uint64)
        for n in COUNTERS]


class _ClientInfo(_Sized):
    """struct nc_client_info (netchannel.h)."""
    _fields_ = [("size", ctypes.c_uint32), ("control_protocol", ctypes.c_uint32),
                ("daemon_min_protocol", ctypes.c_uint32),
                ("daemon_max_protocol", ctypes.c_uint32), ("region_layout", ctypes.c_uint32),
                ("reserved", ctypes.c_uint32), ("daemon_build", ctypes.c_char * 128)]


def _load():
    name = os.environ.get("NETCHANNEL_LIB", "libnetchannel.so.0")
    try:
        lib = ctypes.CDLL(name, use_errno=True)
    except OSError as e:
        where = ("as NETCHANNEL_LIB says" if "NETCHANNEL_LIB" in os.environ else
                 "looked for where the dynamic linker looks: the system's libraries and "
                 "LD_LIBRARY_PATH (" + (os.environ.get("LD_LIBRARY_PATH") or "unset") + ")")
        raise ImportError(f"netchannel: cannot load libnetchannel {name!r} ({where}): {e}. "
                          "Install netchanneld, or run from a build tree with "
                          "'meson devenv -C BUILD', or set NETCHANNEL_LIB to the library "
                          "(BUILD/lib/netchannel/libnetchannel.so.0)") from None
    p, i, sz = ctypes.c_void_p, ctypes.c_int, ctypes.c_size_t
    for name, res, args in (
            ("nc_connect", p, [ctypes.c_char_p, ctypes.c_uint]),
            ("nc_disconnect", None, [p]),
            ("nc_rule_flow", i, [ctypes.POINTER(_Rule), ctypes.c_char_p, ctypes.c_char_p,
                                 ctypes.c_long]),
            ("nc_channel_create", p, [p, ctypes.c_char_p, ctypes.POINTER(_Rule),
                                      ctypes.POINTER(_Opts)]),
            ("nc_channel_attach", p, [p, ctypes.c_char_p]),
            ("nc_channel_destroy", i, [p]),
            ("nc_channel_set_meter", i, [p, ctypes.POINTER(_Meter)]),
            ("nc_recv", ctypes.c_ssize_t, [p, p, sz, i]),
            ("nc_send", ctypes.c_ssize_t, [p, p, sz]),
            ("nc_send_ip", ctypes.c_ssize_t, [p, p, sz]),
            ("nc_channel_fd", i, [p]),
            ("nc_channel_arm", i, [p]),
            ("nc_channel_arm_tx", i, [p]),
            ("nc_channel_id", ctypes.c_uint32, [p]),
            ("nc_channel_stats", i, [p, ctypes.POINTER(_Stats)]),
            ("nc_client_recv", ctypes.c_ssize_t, [p, p, sz, ctypes.POINTER(ctypes.c_uint32), i]),
            ("nc_client_fd", i, [p]),
            ("nc_client_arm", i, [p]),
            ("nc_client_info", i, [p, ctypes.POINTER(_ClientInfo)]),
            ("nc_reconnect", i, [p, i]),
            ("nc_strerror", ctypes.c_char_p, [i]),
            ("nc_last_reason", ctypes.c_char_p, []),
            ("nc_version", ctypes.c_char_p, [])):
        f = getattr(lib, name)
        f.restype, f.argtypes = res, args
    return lib


_lib = _load()


_PROTOS = {"tcp": 6, "udp": 17, "icmp": 1, "icmpv6": 58, "udplite": 136, "sctp": 132}
_PORT_RANGE = 1                                         # NC_PORT_RANGE
_PRIORITY_MAX = 0xffffff                                # NC_PRIORITY_MAX


def _prefix(what, value):
    """An address or prefix ("192.0.2.0/24", "2001:db8::1", an ipaddress object) as a
    network, with a ValueError naming what it is for."""
    try:
        return ipaddress.ip_network(value, strict=False)
    except (ValueError, TypeError) as e:
        raise ValueError(f"{what}: {value!r} is not an address or prefix ({e})") from None


def _ports(what, value):
    """A port (53), a range ((5000, 5099) or "5000-5099") or None (any), as a _Port."""
    if value is None:
        return _Port()
    try:
        if isinstance(value, str):
            lo, _, hi = value.partition("-")
            lo, hi = int(lo), int(hi or lo)
        elif isinstance(value, (tuple, list)):
            lo, hi = (int(v) for v in value)
        else:
            lo = hi = int(value)
    except (ValueError, TypeError):
        raise ValueError(f"{what}: {value!r} is not a port, a (lo, hi) pair or 'lo-hi'") from None
    if not 0 <= lo <= hi <= 65535:
        raise ValueError(f"{what}: {value!r} is not a range within 0..65535")
    return _Port(lo=lo, hi=hi, kind=_PORT_RANGE)


def _rule(dport=None, proto="udp", dst=None, src=None, sport=None, priority=0):
    """struct nc_rule of a channel's match, as the config's channels[].match has it: proto a
    name or number (None: any), dst and src addresses or prefixes of one family, dport and
    sport ports or ranges, priority 0..0xffffff."""
    r = _Rule()
    if proto is not None:
        p = proto
        if isinstance(proto, str):
            p = int(proto) if proto.isdigit() else _PROTOS.get(proto, proto)
        if not isinstance(p, int) or not 0 <= p <= 255:
            raise ValueError(f"proto: {proto!r} is not one of {sorted(_PROTOS)} or 0..255")
        r.proto, r.proto_mask = p, 0xff
    nets = {k: _prefix(k, v) for k, v in (("dst", dst), ("src", src)) if v is not None}
    families = {n.version for n in nets.values()}
    if len(families) > 1:
        raise ValueError(f"dst and src are of two families: {dst!r}, {src!r}")
    r.family = families.pop() if families else 0   # NC_AF_INET 4, NC_AF_INET6 6, NC_AF_ANY 0
    for k, n in nets.items():
        raw = n.network_address.packed
        setattr(r, k, (ctypes.c_uint8 * 16)(*raw))
        setattr(r, f"{k}_len", n.prefixlen)
    r.dport, r.sport = _ports("dport", dport), _ports("sport", sport)
    if not isinstance(priority, int) or not 0 <= priority <= _PRIORITY_MAX:
        raise ValueError(f"priority: {priority!r} is not within 0..{_PRIORITY_MAX}")
    r.priority = priority
    return r


def version():
    """libnetchannel's release and git describe."""
    return _lib.nc_version().decode()


class NetchannelError(OSError):
    """A call the daemon or the library refused: errno, its words, and the daemon's reason
    when it gave one (the limit it names, how busy it is)."""

    def __init__(self, err, what):
        err = abs(err)
        reason = _lib.nc_last_reason().decode()
        text = _lib.nc_strerror(err).decode() + (f": {reason}" if reason else "")
        super().__init__(err, f"{what}: {text}")
        self.reason = reason


def _check(ret, what):
    if ret < 0:
        raise NetchannelError(ret, what)
    return ret


class Channel:
    """A channel of this client: created (it goes with the client) or attached (static)."""

    def __init__(self, client, handle, name):
        self._client, self._h, self.name = client, handle, name
        self._id = _lib.nc_channel_id(handle)
        self._buf = ctypes.create_string_buffer(65536)

    def _handle(self):
        if self._h is None:
            raise ValueError(f"channel {self.name} is closed")
        return self._h

    @property
    def id(self):
        """The channel's id in the daemon."""
        return _lib.nc_channel_id(self._handle())

    def recv(self, timeout=None):
        """The next frame, as bytes; None if none came within timeout seconds (0: do not
        wait; None: wait for ever). Sleeps on the channel's eventfd: no CPU while idle. A
        client made with reconnect=True waits out a restart of the daemon within the
        timeout (see Client)."""
        deadline = _deadline(timeout)
        while True:
            n = _lib.nc_recv(self._handle(), self._buf, len(self._buf), _left_ms(deadline))
            if n == -errno.EAGAIN:
                return None
            if -n in _GONE and self._client._come_back(deadline):
                continue
            if -n in _GONE and self._client._reconnect:
                return None
            _check(n, f"receive on {self.name}")
            return self._buf.raw[:min(n, len(self._buf))]

    def _sent(self, n):
        # With reconnect=True, what the daemon could not take as it went is dropped, as a
        # NIC's full queue would; the next receive waits for the new one.
        if -n in _GONE and self._client._reconnect:
            return 0
        return _check(n, f"send on {self.name}")

    def send(self, frame):
        """Send an Ethernet frame, from the port's MAC and one of the channel's flows."""
        return self._sent(_lib.nc_send(self._handle(), frame, len(frame)))

    def send_ip(self, packet):
        """Send an IP packet; the daemon adds the Ethernet header to the kernel's next hop."""
        return self._sent(_lib.nc_send_ip(self._handle(), packet, len(packet)))

    def fileno(self):
        """The channel's eventfd, readable once packets wait after arm() (selectors,
        asyncio's add_reader). Read its 8 bytes before you arm it again."""
        return _check(_lib.nc_channel_fd(self._handle()), f"eventfd of {self.name}")

    def arm(self):
        """Ask to be woken: False when armed (wait on fileno()), True when packets are
        waiting already (receive them first)."""
        return _check(_lib.nc_channel_arm(self._handle()), f"arm {self.name}") == 1

    def arm_tx(self):
        """After send() raised EAGAIN (the transmit ring full: a transmit meter holds the
        client back): ask to be woken on fileno() when there is room. False when armed (wait
        on fileno(); asyncio: add_reader), True when there is room already (send again)."""
        return _check(_lib.nc_channel_arm_tx(self._handle()), f"arm {self.name} for room") == 1

    def stats(self):
        """The daemon's counters of the channel, as a dict."""
        st = _Stats()
        _check(_lib.nc_channel_stats(self._handle(), ctypes.byref(st)), f"stats of {self.name}")
        # An older library fills fewer: its size says how much.
        return {n: getattr(st, n) for n in _Stats.COUNTERS
                if getattr(_Stats, n).offset + getattr(_Stats, n).size <= st.size}

    def set_meter(self, meter):
        """Put a meter on this created channel, change it, or take it off (None), while
        its traffic flows: a dict of the config's channels[].meter keys, such as
        {"pps": 10000, "burst": 100} or {"bps": 10**8, "burst_bytes": 65536,
        "exceed": "kernel"}."""
        m = _meter(meter) if meter is not None else None
        _check(_lib.nc_channel_set_meter(self._handle(),
                                         ctypes.byref(m) if m is not None else None),
               f"meter of {self.name}")

    def close(self):
        """Destroy a created channel, or let go of an attached one."""
        if self._h is not None:
            h, self._h = self._h, None
            self._client._channels.discard(self)
            self._client._by_id.pop(self._id, None)
            _check(_lib.nc_channel_destroy(h), f"close {self.name}")

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def _deadline(timeout):
    return None if timeout is None else time.monotonic() + timeout


def _left_ms(deadline):
    return -1 if deadline is None else max(0, int((deadline - time.monotonic()) * 1000))


class Client:
    """A connection to netchanneld, as an isolated client (or control only). one_ring: all
    of its channels deliver on one ring, read with recv(); a channel's own recv() is not
    for such a client.

    When the daemon goes away, calls fail with ESHUTDOWN (it stopped cleanly) or EPIPE (it
    died); reconnect() waits for a new one and makes the client's channels again, under
    the same Channel objects. With reconnect=True, receives do that by themselves, within
    their timeout, and sends drop what the daemon could not take as it went."""

    def __init__(self, socket=None, control=False, one_ring=False, reconnect=False):
        path = (socket or os.environ.get("NETCHANNELD_SOCKET") or DEFAULT_SOCKET).encode()
        flags = _CONNECT_CONTROL if control else _CONNECT_ONE_RING if one_ring else 0
        self._reconnect = reconnect
        self._h = _lib.nc_connect(path, flags)
        if not self._h:
            raise NetchannelError(ctypes.get_errno(), f"connect to {path.decode()}")
        self._channels = set()
        self._by_id = {}
        self._buf = ctypes.create_string_buffer(65536)

    def _add(self, h, name):
        ch = Channel(self, h, name)
        self._channels.add(ch)
        self._by_id[ch.id] = ch
        return ch

    def reconnect(self, timeout=None):
        """After the daemon has gone: wait (timeout seconds at most; None: for ever) for a
        new one on the same socket, and make this client's channels again. An experimental
        call of the library (nc_reconnect())."""
        ms = -1 if timeout is None else int(timeout * 1000)
        _check(_lib.nc_reconnect(self._h, ms), "reconnect")
        self._by_id = {ch.id: ch for ch in self._channels}

    def _come_back(self, deadline):
        """With reconnect=True: a new daemon before the deadline (True), or none (False)."""
        if not self._reconnect:
            return False
        while True:
            # A second at a time, so that a receive that waits for ever still loops here.
            wait = 1000 if deadline is None else min(1000, _left_ms(deadline))
            ret = _lib.nc_reconnect(self._h, wait)
            if ret == 0:
                self._by_id = {ch.id: ch for ch in self._channels}
                return True
            if ret != -errno.ETIMEDOUT:
                _check(ret, "reconnect")
            if deadline is not None and time.monotonic() >= deadline:
                return False

    def recv(self, timeout=None):
        """A one_ring client's next frame, of any of its channels: (channel, bytes), or None
        if none came within timeout seconds (0: do not wait; None: wait for ever)."""
        deadline = _deadline(timeout)
        cid = ctypes.c_uint32()
        while True:
            n = _lib.nc_client_recv(self._h, self._buf, len(self._buf), ctypes.byref(cid),
                                    _left_ms(deadline))
            if n == -errno.EAGAIN:
                return None
            if -n in _GONE and self._come_back(deadline):
                continue
            if -n in _GONE and self._reconnect:
                return None
            _check(n, "receive")
            return self._by_id.get(cid.value), self._buf.raw[:min(n, len(self._buf))]

    def fileno(self):
        """A one_ring client's eventfd, readable once packets wait after arm()."""
        return _check(_lib.nc_client_fd(self._h), "the client's eventfd")

    def arm(self):
        """A one_ring client asks to be woken: False when armed, True when packets wait."""
        return _check(_lib.nc_client_arm(self._h), "arm the client") == 1

    def create(self, name, dport=None, proto="udp", dst=None, tx=False, ring_size=0,
               meter=None, src=None, sport=None, priority=0, shared=False):
        """A channel of this client's own, for the flows its match names, as the config's
        channels[].match does: proto (tcp, udp, icmp, icmpv6, udplite, sctp, a number, or
        None for any), dst and src (an address or prefix, IPv4 or IPv6, one family; None:
        any), dport and sport (a port, a (lo, hi) pair or "lo-hi"; None: any), priority
        (0..0xffffff; the higher wins where matches overlap). tx lets it send; meter (a dict
        of the config's channels[].meter keys) meters it (Channel.set_meter()). shared lets
        this user's other clients that create the same match and priority, shared too, join
        it and take their share of its flows, as sockets do with SO_REUSEPORT (the channel's
        id is then the first one's). A bad value raises ValueError naming it."""
        rule = _rule(dport=dport, proto=proto, dst=dst, src=src, sport=sport,
                     priority=priority)
        opts = _Opts(tx=1 if tx else 0, ring_size=ring_size, shared=1 if shared else 0)
        if meter is not None:
            m = _meter(meter)
            opts.meter = ctypes.pointer(m)
        h = _lib.nc_channel_create(self._h, name.encode(), ctypes.byref(rule),
                                   ctypes.byref(opts))
        if not h:
            raise NetchannelError(ctypes.get_errno(), f"create channel {name}")
        return self._add(h, name)

    def attach(self, name):
        """A static channel of the daemon's config (or an operator's), by name."""
        h = _lib.nc_channel_attach(self._h, name.encode())
        if not h:
            raise NetchannelError(ctypes.get_errno(), f"attach to {name}")
        return self._add(h, name)

    def info(self):
        """What the connection agreed with the daemon at HELLO: control_protocol,
        daemon_min_protocol and daemon_max_protocol, region_layout (1 or 2; 0: none) and
        daemon_build ("" from a daemon of protocol 4). An experimental call of the library."""
        i = _ClientInfo()
        _check(_lib.nc_client_info(self._h, ctypes.byref(i)), "client info")
        return {n: (getattr(i, n).decode() if n == "daemon_build" else getattr(i, n))
                for n, _ in _ClientInfo._fields_ if n not in ("size", "reserved")}

    def close(self):
        """Destroy the client's channels and disconnect."""
        for ch in list(self._channels):
            ch.close()
        if self._h:
            h, self._h = self._h, None
            _lib.nc_disconnect(h)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
