"""flip_byte.py IN OUT OFFSET [VALUE]: copies IN to OUT with one byte replaced
(negative offsets count from the end; VALUE defaults to the byte xor 0xff)."""
import sys

data = bytearray(open(sys.argv[1], "rb").read())
off = int(sys.argv[3])
data[off] = int(sys.argv[4]) if len(sys.argv) > 4 else data[off] ^ 0xFF
open(sys.argv[2], "wb").write(bytes(data))
