#include "runtime/io/Npy.h"
#include "runtime/plan/TempPath.h"
#include "runtime/plan/NpzNames.h"
#include "runtime/io/Files.h"
#include "runtime/kernels/NarrowTypes.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <set>
#include <sys/stat.h>
#include <unistd.h>
#include <zip.h>
#include <zlib.h>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace ds::rt {

namespace {
/// libzip's message for an error code (zip_open's).
std::string zipErrorText(int code) {
  zip_error_t ze;
  zip_error_init_with_code(&ze, code);
  std::string msg = zip_error_strerror(&ze);
  zip_error_fini(&ze);
  return msg;
}
} // namespace
namespace {

constexpr char kMagic[] = "\x93NUMPY";
constexpr uint64_t kMaxArrayBytes = uint64_t(1) << 40;

struct DescrMap { const char *descr; DType dtype; };
constexpr DescrMap kDescrs[] = {
    {"<f4", plan::F32}, {"<f8", plan::F64}, {"<f2", plan::F16}, {"<i4", plan::I32},
    {"<i8", plan::I64}, {"<i2", plan::I16}, {"|i1", plan::I8},  {"|u1", plan::U8},
    {"|b1", plan::BOOL},
    {"<u2", plan::BF16}, // numpy has no bfloat16: its bits travel as uint16
    {"<u2", plan::U16},  // listed last, so "<u2" reads as U16 (see npyHolds)
    {"<u4", plan::U32},  {"<u8", plan::U64},
};

/// The header dict of a .npy file, parsed strictly as the Python literal
/// numpy writes (numpy reads it with ast.literal_eval): exactly the keys
/// 'descr' (a string), 'fortran_order' (True or False) and 'shape' (a tuple
/// of integers), each once, in either quote style; anything else (another
/// key, a key twice: numpy takes the last, a scan the first) is refused,
/// so ds and numpy never read one file as two arrays.
struct NpyHeader {
  std::string descr;
  bool fortran = false;
  std::vector<int64_t> shape;
};

absl::StatusOr<NpyHeader> parseHeader(const std::string &h, const std::string &what) {
  size_t p = 0;
  auto bad = [&](const std::string &why) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": malformed .npy header (", why, " at byte ", p, ")"));
  };
  auto ws = [&] {
    while (p < h.size() && (h[p] == ' ' || h[p] == '\t' || h[p] == '\n' || h[p] == '\r')) ++p;
  };
  auto quoted = [&](std::string &out) -> bool {
    if (p >= h.size() || (h[p] != '\'' && h[p] != '"')) return false;
    const char q = h[p];
    size_t end = h.find(q, p + 1);
    if (end == std::string::npos) return false;
    out = h.substr(p + 1, end - p - 1);
    if (out.find('\\') != std::string::npos) return false; // no escapes in numpy's values
    p = end + 1;
    return true;
  };
  NpyHeader r;
  std::set<std::string> seen;
  ws();
  if (p >= h.size() || h[p] != '{') return bad("expected '{'");
  ++p;
  for (;;) {
    ws();
    if (p < h.size() && h[p] == '}') break;
    std::string key;
    if (!quoted(key)) return bad("expected a quoted key");
    if (key != "descr" && key != "fortran_order" && key != "shape")
      return absl::InvalidArgumentError(absl::StrCat(
          what, ": .npy header has the key '", absl::CHexEscape(key.substr(0, 64)),
          "' (numpy writes only 'descr', 'fortran_order' and 'shape')"));
    if (!seen.insert(key).second)
      return absl::InvalidArgumentError(
          absl::StrCat(what, ": .npy header gives '", key, "' twice"));
    ws();
    if (p >= h.size() || h[p] != ':') return bad("expected ':'");
    ++p;
    ws();
    if (key == "descr") {
      if (!quoted(r.descr)) return bad("'descr' is not a string");
    } else if (key == "fortran_order") {
      if (h.compare(p, 4, "True") == 0) r.fortran = true, p += 4;
      else if (h.compare(p, 5, "False") == 0) r.fortran = false, p += 5;
      else return bad("'fortran_order' is not True or False");
    } else {
      if (p >= h.size() || h[p] != '(') return bad("'shape' is not a tuple");
      ++p;
      for (;;) {
        ws();
        if (p < h.size() && h[p] == ')') break;
        size_t start = p;
        while (p < h.size() && h[p] >= '0' && h[p] <= '9') ++p;
        int64_t d;
        if (p == start || p - start > 19 || !absl::SimpleAtoi(h.substr(start, p - start), &d))
          return absl::InvalidArgumentError(absl::StrCat(
              what, ": bad dimension '",
              absl::CHexEscape(h.substr(start, std::min<size_t>(
                                                   24, h.find_first_of(",) ", start + 1) - start))),
              "' in .npy shape"));
        r.shape.push_back(d);
        ws();
        if (p < h.size() && h[p] == ',') ++p;
        else if (p >= h.size() || h[p] != ')') return bad("expected ',' or ')' in 'shape'");
      }
      ++p; // ')'
    }
    ws();
    if (p < h.size() && h[p] == ',') ++p;
    else if (p >= h.size() || h[p] != '}') return bad("expected ',' or '}'");
  }
  ++p; // '}'
  ws();
  if (p != h.size()) return bad("text after the dict");
  for (const char *key : {"descr", "fortran_order", "shape"})
    if (!seen.count(key))
      return absl::InvalidArgumentError(absl::StrCat(what, ": .npy header has no '", key, "'"));
  return r;
}

} // namespace

absl::StatusOr<HostArray> parseNpy(const uint8_t *data, size_t size, const std::string &what) {
  if (size < 10 || std::memcmp(data, kMagic, 6) != 0)
    return absl::InvalidArgumentError(absl::StrCat(what, ": not a .npy array (bad magic)"));
  uint8_t major = data[6];
  size_t headerLen, headerStart;
  if (major == 1) {
    headerLen = data[8] | (size_t(data[9]) << 8);
    headerStart = 10;
  } else if (major == 2 || major == 3) {
    if (size < 12)
      return absl::InvalidArgumentError(absl::StrCat(what, ": truncated .npy header"));
    headerLen = data[8] | (size_t(data[9]) << 8) | (size_t(data[10]) << 16) |
                (size_t(data[11]) << 24);
    headerStart = 12;
  } else {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": unsupported .npy version ", int(major)));
  }
  if (headerLen > size - headerStart || headerLen > (1u << 20))
    return absl::InvalidArgumentError(absl::StrCat(what, ": truncated .npy header"));
  std::string h(reinterpret_cast<const char *>(data + headerStart), headerLen);

  DS_ASSIGN_OR_RETURN(NpyHeader header, parseHeader(h, what));
  const std::string &descr = header.descr;
  HostArray a;
  bool found = false;
  // '=' (native) and no byte-order mark at all (np.dtype('f4')) both mean
  // this machine's order, little-endian, as '<' and '|' do.
  auto sameType = [&](const char *known) {
    if (descr == known) return true;
    std::string code = std::string(known).substr(1);
    return descr == code || (!descr.empty() && descr[0] == '=' && descr.substr(1) == code);
  };
  for (const auto &d : kDescrs)
    if (sameType(d.descr)) {
      a.dtype = d.dtype;
      found = true;
    }
  // ml_dtypes' float8/float4/int4/int2 arrays: numpy saves them as 1-byte
  // void ('<V1'; '<f1' for float8_e5m2). Their bytes are the elements.
  for (const char *raw : {"|V1", "<V1", "|f1", "<f1"})
    if (!found && sameType(raw)) {
      a.dtype = plan::U8;
      found = true;
    }
  if (!found)
    return absl::InvalidArgumentError(absl::StrCat(
        what, ": unsupported dtype '", absl::CHexEscape(descr.substr(0, 64)),
        "' (supported: <f4, <f8, <f2, |i1, <i2, <i4, <i8, |u1, <u2, <u4, <u8, |b1: float32, "
        "float64, float16, int8/16/32/64, uint8/16/32/64, bool; "
        "little-endian)"));
  if (header.fortran)
    return absl::InvalidArgumentError(absl::StrCat(
        what, ": fortran-order arrays are not supported; save np.ascontiguousarray(x)"));
  a.shape = header.shape;
  auto bytes = checkedByteSize(a.shape, a.dtype);
  if (!bytes.ok())
    return absl::InvalidArgumentError(absl::StrCat(what, ": ", bytes.status().message()));
  size_t dataStart = headerStart + headerLen;
  if (*bytes > kMaxArrayBytes || size - dataStart != *bytes)
    return absl::InvalidArgumentError(absl::StrCat(
        what, ": .npy holds ", size - dataStart, " data bytes but its shape (",
        shapeToString(a.shape), ") and dtype need ", *bytes));
  a.data.assign(data + dataStart, data + size);
  return a;
}

bool npyHolds(DType read, DType wanted) {
  return read == wanted || (read == plan::U16 && wanted == plan::BF16) ||
         (read == plan::U8 && isNarrowDType(wanted)) ||
         (read == plan::I8 && (wanted == plan::I4 || wanted == plan::I2));
}

absl::StatusOr<const uint8_t *> npyBytesAs(const HostArray &a, DType wanted,
                                           std::vector<uint8_t> &scratch) {
  int bits = 0;
  switch (wanted) {
  case plan::F4E2M1:
  case plan::I4:
  case plan::U4: bits = 4; break;
  case plan::I2:
  case plan::U2: bits = 2; break;
  default: return a.data.data();
  }
  const bool values = a.dtype == plan::I8; // int8 values, not bit patterns
  const int lo = values ? -(1 << (bits - 1)) : 0, hi = values ? (1 << (bits - 1)) - 1 : (1 << bits) - 1;
  scratch.resize(a.data.size());
  for (size_t i = 0; i < a.data.size(); ++i) {
    const int v = values ? int(static_cast<int8_t>(a.data[i])) : int(a.data[i]);
    if (v < lo || v > hi)
      return absl::InvalidArgumentError(absl::StrCat(
          "element ", i, " is ", v, ", which ", dtypeName(wanted), " cannot hold (",
          values ? "int8 values" : "uint8 bit patterns", " must be in [", lo, ", ", hi, "])"));
    scratch[i] = static_cast<uint8_t>(v & ((1 << bits) - 1));
  }
  return scratch.data();
}

std::vector<uint8_t> serializeNpy(const HostArray &a) {
  // The narrow types as numpy can read them: 4-/2-bit signed integers as
  // int8 values, the rest (float8/float4 bit patterns, unsigned) as uint8.
  if (isNarrowDType(a.dtype)) {
    HostArray bytes = a;
    bytes.dtype = a.dtype == plan::I4 || a.dtype == plan::I2 ? plan::I8 : plan::U8;
    if (bytes.dtype == plan::I8) {
      const int bits = a.dtype == plan::I4 ? 4 : 2;
      for (uint8_t &b : bytes.data)
        b = static_cast<uint8_t>(math::narrowIntValue(b, bits, /*isSigned=*/true));
    }
    return serializeNpy(bytes);
  }
  const char *descr = "<f4";
  for (const auto &d : kDescrs)
    if (d.dtype == a.dtype) descr = d.descr;
  std::string shape = a.shape.size() == 1 ? absl::StrCat(a.shape[0], ",")
                                          : absl::StrJoin(a.shape, ", ");
  std::string h = absl::StrCat("{'descr': '", descr,
                               "', 'fortran_order': False, 'shape': (", shape, "), }");
  size_t total = 10 + h.size() + 1;
  h.append((64 - total % 64) % 64, ' ');
  h.push_back('\n');
  std::vector<uint8_t> out(kMagic, kMagic + 6);
  out.push_back(1);
  out.push_back(0);
  out.push_back(static_cast<uint8_t>(h.size() & 0xff));
  out.push_back(static_cast<uint8_t>(h.size() >> 8));
  out.insert(out.end(), h.begin(), h.end());
  out.insert(out.end(), a.data.begin(), a.data.end());
  return out;
}

namespace {
absl::StatusOr<std::vector<uint8_t>> readFile(const std::string &path) {
  DS_ASSIGN_OR_RETURN(int fd, openRegularFile(path));
  struct stat st;
  // The .npy limit (docs/security.md) plus its header.
  if (::fstat(fd, &st) != 0 || static_cast<uint64_t>(st.st_size) > (uint64_t(1) << 40) + (1 << 20)) {
    ::close(fd);
    return absl::InvalidArgumentError(absl::StrCat(path, " is larger than an .npy ds reads (1 TiB)"));
  }
  std::vector<uint8_t> bytes(static_cast<size_t>(st.st_size));
  size_t got = 0;
  while (got < bytes.size()) {
    ssize_t n = ::read(fd, bytes.data() + got, bytes.size() - got);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    got += static_cast<size_t>(n);
  }
  ::close(fd);
  if (got != bytes.size()) return absl::DataLossError(absl::StrCat("reading ", path, " failed"));
  return bytes;
}

absl::Status writeFileAtomically(const std::string &path, const std::vector<uint8_t> &bytes) {
  return replaceFile(path, bytes.data(), bytes.size());
}
} // namespace

absl::StatusOr<HostArray> readNpy(const std::string &path) {
  DS_ASSIGN_OR_RETURN(std::vector<uint8_t> bytes, readFile(path));
  return parseNpy(bytes.data(), bytes.size(), path);
}

absl::Status writeNpy(const std::string &path, const HostArray &a) {
  return writeFileAtomically(path, serializeNpy(a));
}

absl::StatusOr<std::vector<std::pair<std::string, HostArray>>> readNpz(const std::string &path) {
  // A FIFO or device would block or never end: only regular files are read.
  struct stat fileStat;
  if (::stat(path.c_str(), &fileStat) == 0 && !S_ISREG(fileStat.st_mode))
    return absl::InvalidArgumentError(absl::StrCat(path, " is not a regular file"));
  int err = 0;
  zip_t *z = zip_open(path.c_str(), ZIP_RDONLY | ZIP_CHECKCONS, &err);
  if (!z) {
    std::string msg = zipErrorText(err);
    // ZIP_CHECKCONS reports two entries of one name as "file exists".
    if (err == ZIP_ER_EXISTS) msg = "two entries have the same name (an array given twice)";
    // And an inconsistent directory (a zip64 size marker without its zip64
    // record) as "no such file", of a file that is there.
    if (err == ZIP_ER_NOENT && ::stat(path.c_str(), &fileStat) == 0)
      msg = "its zip directory is damaged (an entry it lists cannot be found)";
    return absl::InvalidArgumentError(absl::StrCat("cannot read ", path, " as .npz: ", msg));
  }
  std::vector<std::pair<std::string, HostArray>> out;
  absl::Status status;
  zip_int64_t n = zip_get_num_entries(z, 0);
  for (zip_int64_t i = 0; i < n && status.ok(); ++i) {
    zip_stat_t st;
    if (zip_stat_index(z, i, 0, &st) != 0 || !(st.valid & ZIP_STAT_NAME) ||
        !(st.valid & ZIP_STAT_SIZE)) {
      status = absl::InvalidArgumentError(absl::StrCat(path, ": unreadable entry ", i));
      break;
    }
    std::string name = st.name;
    std::string what = absl::StrCat(path, "[", name, "]");
    if (!absl::EndsWith(name, ".npy")) {
      status = absl::InvalidArgumentError(absl::StrCat(what, ": not an .npy entry"));
      break;
    }
    if (st.size > kMaxArrayBytes + (1u << 20)) {
      status = absl::InvalidArgumentError(absl::StrCat(what, ": entry too large"));
      break;
    }
    // The size is allocated before a byte is read: it must be one the file
    // can hold (a stored entry is its own size; deflate shrinks at most
    // ~1032:1), so a 200-byte file cannot make ds-run allocate gigabytes.
    if ((st.valid & ZIP_STAT_COMP_SIZE) && (st.valid & ZIP_STAT_COMP_METHOD)) {
      bool stored = st.comp_method == ZIP_CM_STORE;
      if ((stored && st.size != st.comp_size) ||
          st.size > st.comp_size * 1100 + (uint64_t(1) << 16)) {
        status = absl::InvalidArgumentError(absl::StrCat(
            what, ": declares ", st.size, " bytes from ", st.comp_size,
            stored ? " stored bytes" : " compressed bytes", "; the zip directory is damaged"));
        break;
      }
    }
    // Deflate (np.savez_compressed) and stored (np.savez) always; other
    // methods only as this libzip was built.
    if ((st.valid & ZIP_STAT_COMP_METHOD) &&
        !zip_compression_method_supported(static_cast<zip_int32_t>(st.comp_method), 0)) {
      status = absl::InvalidArgumentError(absl::StrCat(
          what, ": compression method ", st.comp_method,
          st.comp_method == ZIP_CM_LZMA ? " (LZMA)" : st.comp_method == ZIP_CM_BZIP2 ? " (bzip2)" : "",
          " is not supported; np.savez (stored) and np.savez_compressed (deflate) write what ds "
          "reads"));
      break;
    }
    std::vector<uint8_t> buf(st.size);
    zip_file_t *f = zip_fopen_index(z, i, 0);
    // In pieces: one read of more than 4 GiB from a deflated entry returns
    // wrong bytes past 2^32 (zlib's avail_in/avail_out are 32-bit).
    zip_int64_t got = f ? 0 : -1;
    while (f && static_cast<zip_uint64_t>(got) < st.size) {
      zip_uint64_t piece = std::min<zip_uint64_t>(st.size - got, zip_uint64_t(1) << 30);
      zip_int64_t n = zip_fread(f, buf.data() + got, piece);
      if (n <= 0) {
        if (n < 0) got = -1;
        break;
      }
      got += n;
    }
    if (f) zip_fclose(f);
    if (got < 0 || static_cast<zip_uint64_t>(got) != st.size) {
      status = absl::InvalidArgumentError(absl::StrCat(what, ": truncated or corrupt entry"));
      break;
    }
    // libzip checks an entry's CRC-32 only when a read runs past its end;
    // check it here, so a flipped byte is an error, not silently used data.
    if (!(st.valid & ZIP_STAT_CRC) ||
        crc32_z(crc32_z(0L, Z_NULL, 0), buf.data(), buf.size()) != st.crc) {
      status = absl::DataLossError(absl::StrCat(
          what, ": CRC-32 mismatch: the file is damaged (its bytes differ from what was written)"));
      break;
    }
    auto arr = parseNpy(buf.data(), buf.size(), what);
    if (!arr.ok()) {
      status = arr.status();
      break;
    }
    out.emplace_back(name.substr(0, name.size() - 4), std::move(*arr));
  }
  zip_discard(z);
  if (!status.ok())
    return status;
  return out;
}

absl::Status writeNpz(const std::string &path,
                      const std::vector<std::pair<std::string, HostArray>> &arrays) {
  std::string tmp = tempPathFor(path);
  std::remove(tmp.c_str());
  int err = 0;
  zip_t *z = zip_open(tmp.c_str(), ZIP_CREATE | ZIP_TRUNCATE, &err);
  if (!z) return absl::InvalidArgumentError(absl::StrCat("cannot create ", tmp, ": ", zipErrorText(err)));
  std::vector<std::vector<uint8_t>> keep; // libzip reads sources at close
  keep.reserve(arrays.size());
  for (const auto &[name, arr] : arrays) {
    // A member name an extractor could turn into a path outside its
    // directory (a hostile model names its outputs): refused, not written.
    // Too long for a zip member name, it would be written truncated.
    if (const char *problem = ds::plan::npzNameProblem(name)) {
      zip_discard(z);
      return absl::InvalidArgumentError(absl::StrCat(
          "cannot write '", absl::CHexEscape(name.substr(0, 200)), name.size() > 200 ? "..." : "",
          "' into ", path, ": the name ", problem,
          " (an .npz member name must be relative, without '..' components or backslashes, "
          "which an extractor could write outside its directory)"));
    }
    keep.push_back(serializeNpy(arr));
    zip_source_t *src = zip_source_buffer(z, keep.back().data(), keep.back().size(), 0);
    zip_int64_t idx = src ? zip_file_add(z, (name + ".npy").c_str(), src, ZIP_FL_ENC_UTF_8) : -1;
    if (idx < 0) {
      if (src) zip_source_free(src);
      std::string why = zip_strerror(z);
      zip_discard(z);
      return absl::InternalError(absl::StrCat("cannot add '", absl::CHexEscape(name), "' to ", path,
                                              ": ", why));
    }
    zip_set_file_compression(z, idx, ZIP_CM_STORE, 0);
  }
  if (zip_close(z) != 0) {
    std::string msg = zip_strerror(z);
    zip_discard(z);
    return absl::InternalError(absl::StrCat("writing ", path, ": ", msg));
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0)
    return absl::InternalError(absl::StrCat("rename to ", path, ": ", std::strerror(errno)));
  return absl::OkStatus();
}

} // namespace ds::rt
