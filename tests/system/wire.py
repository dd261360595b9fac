"""A minimal encoder and decoder of Cairn's wire format (docs/protocol.md)
for tests that speak to daemons directly: the frame checksum and the
tagged fields of a body."""

import struct


def _crc32c_table():
    t = []
    for i in range(256):
        c = i
        for _ in range(8):
            c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
        t.append(c)
    return t


CRC_T = _crc32c_table()


def crc32c(data):
    c = 0xFFFFFFFF
    for b in data:
        c = CRC_T[(c ^ b) & 0xFF] ^ (c >> 8)
    return c ^ 0xFFFFFFFF


def tlv(tag, val):
    """One field; val is bytes, str (UTF-8) or int (u64)."""
    if isinstance(val, int):
        val = struct.pack("<Q", val)
    elif isinstance(val, str):
        val = val.encode()
    return struct.pack("<HI", tag, len(val)) + val


def parse_tlv(body):
    """Every field of a body, in order: [(tag, bytes)]."""
    out, i = [], 0
    while i + 6 <= len(body):
        tag, n = struct.unpack_from("<HI", body, i)
        out.append((tag, body[i + 6:i + 6 + n]))
        i += 6 + n
    return out


def fields(body):
    """A body's fields by tag (the last of a repeated tag)."""
    return dict(parse_tlv(body))
