"""damage.py FILE (flip|truncate|flip-entry NAME|nan NAME META) [drop-digests|fix-digests META]:
damages a checkpoint file the way a bad disk or a partial copy would; drop-digests deletes the
metadata's file digests, fix-digests makes them agree with the damaged file (so that only the zip
entries' own CRC-32s can tell)."""
import re
import sys

path, how = sys.argv[1], sys.argv[2]
data = bytearray(open(path, "rb").read())
if how == "flip":  # a byte in the middle of the file (inside some tensor's data)
    data[len(data) // 2] ^= 0x40
elif how == "truncate":
    data = data[: len(data) - 100]
elif how == "flip-entry":  # a byte of one tensor's data, found by its zip entry name
    at = data.find(b"\x93NUMPY", data.find(sys.argv[3].encode() + b".npy"))
    header = 10 + int.from_bytes(data[at + 8:at + 10], "little")
    data[at + header + 1] ^= 0x40
open(path, "wb").write(data)
if len(sys.argv) > 5 and sys.argv[-2] == "drop-digests":
    meta = sys.argv[-1]
    text = open(meta).read()
    open(meta, "w").write(re.sub(r"files \{[^}]*\}\s*", "", text))
if len(sys.argv) > 5 and sys.argv[-2] == "fix-digests":
    import zlib
    meta = sys.argv[-1]
    text = open(meta).read()
    text = re.sub(r"\n  size: \d+", "\n  size: %d" % len(data), text)
    text = re.sub(r"crc32: \d+", "crc32: %d" % zlib.crc32(data), text)
    open(meta, "w").write(text)
if how == "nan":  # a NaN in one state, the file's size and CRC in the meta made to agree
    import io
    import zlib
    import zipfile
    import numpy as np
    name, meta = sys.argv[3], sys.argv[4]
    arrays = dict(np.load(path))
    arrays[name].flat[0] = np.nan
    with zipfile.ZipFile(path, "w") as z:
        for k, v in arrays.items():
            b = io.BytesIO()
            np.save(b, v)
            z.writestr(k + ".npy", b.getvalue())
    data = open(path, "rb").read()
    text = open(meta).read()
    text = re.sub(r"\n  size: \d+", "\n  size: %d" % len(data), text)
    text = re.sub(r"crc32: \d+", "crc32: %d" % zlib.crc32(data), text)
    open(meta, "w").write(text)
