# SPDX-License-Identifier: BSD-3-Clause
"""pcap files of exact bytes, for every Python test and script (scapy's raw reader and writer:
malformed frames are written as they are, where building them as packets would mend them)."""
from scapy.utils import RawPcapReader, RawPcapWriter

LINKTYPE_ETHERNET = 1
EPOCH = 1700000000              # the frames' timestamps: a fixed second, the index as usec


def write_pcap(path, frames):
    """Write frames (bytes) to path, in order; an empty list gives an empty capture."""
    w = RawPcapWriter(path, linktype=LINKTYPE_ETHERNET, sync=False)
    w.write_header(None)
    for i, data in enumerate(frames):
        w.write_packet(bytes(data), sec=EPOCH + i // 1000000, usec=i % 1000000)
    w.close()


def read_pcap(path):
    """The frames of a capture, as bytes."""
    r = RawPcapReader(path)
    try:
        return [bytes(data) for data, _ in r]
    finally:
        r.close()
