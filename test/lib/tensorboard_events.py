"""Reads a TensorBoard event file without TensorFlow: TFRecord framing with
its masked CRC-32C checks, and the Event/Summary fields ds writes, decoded
from the protobuf wire format. Returns (file_version, [(tag, step, value)])."""
import struct


def _crc32c(data):
    crc = 0xFFFFFFFF
    for b in data:
        crc ^= b
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82F63B78 if crc & 1 else 0)
    return crc ^ 0xFFFFFFFF


def _masked(data):
    c = _crc32c(data)
    return (((c >> 15) | (c << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def _fields(buf):
    """(field number, wire type, value) of a protobuf message."""
    i = 0
    while i < len(buf):
        key, i = _varint(buf, i)
        field, wire = key >> 3, key & 7
        if wire == 0:
            v, i = _varint(buf, i)
        elif wire == 1:
            v, i = buf[i:i + 8], i + 8
        elif wire == 2:
            n, i = _varint(buf, i)
            v, i = buf[i:i + n], i + n
        elif wire == 5:
            v, i = buf[i:i + 4], i + 4
        else:
            raise ValueError("wire type %d" % wire)
        yield field, wire, v


def _varint(buf, i):
    shift = value = 0
    while True:
        b = buf[i]
        i += 1
        value |= (b & 0x7F) << shift
        shift += 7
        if not b & 0x80:
            return value, i


def read(path):
    data = open(path, "rb").read()
    i, version, scalars = 0, None, []
    while i < len(data):
        header = data[i:i + 8]
        (length,) = struct.unpack("<Q", header)
        (length_crc,) = struct.unpack("<I", data[i + 8:i + 12])
        if length_crc != _masked(header):
            raise ValueError("bad length CRC at offset %d" % i)
        payload = data[i + 12:i + 12 + length]
        (payload_crc,) = struct.unpack("<I", data[i + 12 + length:i + 16 + length])
        if payload_crc != _masked(payload):
            raise ValueError("bad payload CRC at offset %d" % i)
        i += 16 + length
        step = 0
        for field, _, v in _fields(payload):
            if field == 2:
                step = v
            elif field == 3:
                version = v.decode()
            elif field == 5:
                for f, _, value in _fields(v):
                    if f != 1:
                        continue
                    tag, simple = None, None
                    for vf, _, vv in _fields(value):
                        if vf == 1:
                            tag = vv.decode()
                        elif vf == 2:
                            (simple,) = struct.unpack("<f", vv)
                    scalars.append((tag, step, simple))
    return version, scalars
