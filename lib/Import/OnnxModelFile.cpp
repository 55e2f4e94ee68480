//===- OnnxModelFile.cpp - reading ONNX files safely ----------------------===//
#include "ds/Support/TextLimits.h"
#include "ds/Import/OnnxModelFile.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <climits>
#include <cstring>
#include <fcntl.h>
#include <linux/openat2.h>
#include <sys/stat.h>

#include <set>
#include <sys/syscall.h>
#include <unistd.h>

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>
#include <google/protobuf/wire_format_lite.h>
#include <google/protobuf/util/json_util.h>
#include <onnx/defs/parser.h>

#include "llvm/ADT/StringRef.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FormatVariadic.h"

using namespace mlir::ds;
using llvm::createStringError;

namespace {

llvm::Error err(const llvm::Twine &msg) {
  return createStringError(std::make_error_code(std::errc::invalid_argument), msg);
}

/// An fd that closes itself.
struct Fd {
  int fd = -1;
  explicit Fd(int f) : fd(f) {}
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
  Fd(const Fd &) = delete;
  Fd &operator=(const Fd &) = delete;
};

/// The size of a model file, refused unless it is a regular file protobuf
/// can hold.
llvm::Expected<uint64_t> modelFileSize(int fd, const std::string &path) {
  struct stat st;
  if (::fstat(fd, &st) != 0)
    return err("cannot stat " + path + ": " + std::strerror(errno));
  if (!S_ISREG(st.st_mode))
    return err(path + " is not a regular file");
  if (static_cast<uint64_t>(st.st_size) > kMaxModelFileBytes)
    return err(llvm::formatv("{0} is {1} bytes, over the 2 GiB - 1 protobuf limit; "
                             "store large weights as external data",
                             path, st.st_size)
                   .str());
  return static_cast<uint64_t>(st.st_size);
}

llvm::Expected<std::string> readWholeFile(int fd, const std::string &path) {
  auto size = modelFileSize(fd, path);
  if (!size) return size.takeError();
  std::string data(static_cast<size_t>(*size), '\0');
  size_t got = 0;
  while (got < data.size()) {
    ssize_t n = ::read(fd, data.data() + got, data.size() - got);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return err("reading " + path + " failed");
    got += static_cast<size_t>(n);
  }
  return data;
}

} // namespace

using mlir::ds::checkNesting;

llvm::Expected<onnx::ModelProto> mlir::ds::readModelFile(const std::string &path) {
  // O_NONBLOCK: opening a FIFO must not wait for a writer (it is refused
  // as not a regular file below); reads of regular files ignore it.
  Fd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK));
  if (fd.fd < 0)
    return err("cannot open " + path + ": " + std::strerror(errno));
  onnx::ModelProto model;
  llvm::StringRef p(path);
  bool text = p.ends_with(".onnxtxt") || p.ends_with(".onnxtext");
  if (!text && !p.ends_with(".json")) {
    // Binary: parsed from the file in chunks, so the weights are in memory
    // once (in the message), never also as the file's bytes.
    auto size = modelFileSize(fd.fd, path);
    if (!size) return size.takeError();
    google::protobuf::io::FileInputStream file(fd.fd);
    google::protobuf::io::CodedInputStream in(&file);
    in.SetTotalBytesLimit(static_cast<int>(*size));
    // The default recursion limit (100) stays: it bounds nested subgraphs.
    if (!model.ParseFromCodedStream(&in) || !in.ConsumedEntireMessage() || file.GetErrno() != 0)
      return err(path + ": not a valid ONNX model (protobuf does not parse)");
    return model;
  }
  auto data = readWholeFile(fd.fd, path);
  if (!data) return data.takeError();
  return parseModelText(*data, path, /*json=*/!text);
}

/// Where ONNX's text parser threw converting a number: the first numeric
/// token, with its line, that std::stoll (integers) or std::stof (the rest)
/// cannot convert, as the parser would.
static std::string badNumber(const std::string &data) {
  size_t line = 1;
  for (size_t i = 0; i < data.size(); ++i) {
    char c = data[i];
    if (c == '\n') ++line;
    if (c == '"') { // a string: skip it
      for (++i; i < data.size() && data[i] != '"'; ++i)
        if (data[i] == '\n') ++line;
      continue;
    }
    bool startsNumber = std::isdigit(static_cast<unsigned char>(c)) ||
                        ((c == '-' || c == '+' || c == '.') && i + 1 < data.size() &&
                         std::isdigit(static_cast<unsigned char>(data[i + 1])));
    bool inWord = i > 0 && (std::isalnum(static_cast<unsigned char>(data[i - 1])) ||
                            data[i - 1] == '_' || data[i - 1] == '.');
    if (!startsNumber || inWord) continue;
    size_t end = i + 1;
    while (end < data.size() &&
           (std::isdigit(static_cast<unsigned char>(data[end])) || data[end] == '.' ||
            data[end] == 'e' || data[end] == 'E' ||
            ((data[end] == '-' || data[end] == '+') &&
             (data[end - 1] == 'e' || data[end - 1] == 'E'))))
      ++end;
    std::string token = data.substr(i, end - i);
    bool integer = token.find_first_of(".eE") == std::string::npos;
    bool ok = true;
    try {
      size_t used = 0;
      if (integer) (void)std::stoll(token, &used);
      else (void)std::stof(token, &used);
    } catch (const std::exception &) {
      ok = false;
    }
    if (!ok)
      return "the number '" + token.substr(0, 64) + "' (line " + std::to_string(line) +
             ") is malformed or out of range";
    i = end - 1;
  }
  return "a number is malformed or out of range";
}

llvm::Expected<onnx::ModelProto> mlir::ds::parseModelText(const std::string &data,
                                                         const std::string &name, bool json) {
  onnx::ModelProto model;
  if (std::string deep = checkNesting(data, maxTextNesting(),
                                      json ? TextSyntax::Json : TextSyntax::OnnxText);
      !deep.empty())
    return err(name + ": " + deep);
  if (!json) {
    // ONNX's parser converts numbers with std::stoll/std::stof, which throw
    // on malformed or out-of-range text.
    try {
      auto status = onnx::OnnxParser::Parse(model, data.c_str());
      if (!status.IsOK()) {
        std::string msg = status.ErrorMessage();
        if (msg.size() > 600) msg = msg.substr(0, 600) + "...";
        return err(name + ": not valid ONNX text: " + msg);
      }
    } catch (const std::exception &e) {
      return err(name + ": not valid ONNX text: " + badNumber(data) + " (" + e.what() + ")");
    }
    return model;
  }
  auto status = google::protobuf::util::JsonStringToMessage(data, &model);
  if (!status.ok())
    return err(name + ": not a valid ONNX model in protobuf JSON: " +
               std::string(status.message()));
  return model;
}

namespace {
using google::protobuf::internal::WireFormatLite;

/// Copies one message's fields from `in` to `out`; `onField` handles the
/// length-delimited field it returns true for (positioned after the tag).
template <typename Fn>
bool filterMessage(google::protobuf::io::CodedInputStream &in,
                   google::protobuf::io::CodedOutputStream &out, Fn onField) {
  while (uint32_t tag = in.ReadTag()) {
    if (WireFormatLite::GetTagWireType(tag) == WireFormatLite::WIRETYPE_LENGTH_DELIMITED) {
      int handled = onField(WireFormatLite::GetTagFieldNumber(tag), tag);
      if (handled < 0) return false;
      if (handled) continue;
    }
    if (!WireFormatLite::SkipField(&in, tag, &out)) return false;
  }
  return in.ConsumedEntireMessage();
}

/// Reads a length-delimited field's bytes.
bool readDelimited(google::protobuf::io::CodedInputStream &in, std::string &bytes) {
  uint32_t len;
  return in.ReadVarint32(&len) && in.ReadString(&bytes, static_cast<int>(len));
}

void writeDelimited(google::protobuf::io::CodedOutputStream &out, uint32_t tag,
                    const std::string &bytes) {
  out.WriteTag(tag);
  out.WriteVarint32(static_cast<uint32_t>(bytes.size()));
  out.WriteString(bytes);
}
} // namespace

llvm::Expected<onnx::ModelProto>
mlir::ds::readModelWithoutData(const std::string &path,
                               const std::function<bool(const std::string &)> &drop) {
  llvm::StringRef p(path);
  if (p.ends_with(".onnxtxt") || p.ends_with(".onnxtext") || p.ends_with(".json")) {
    auto model = readModelFile(path);
    if (!model) return model.takeError();
    for (auto &init : *model->mutable_graph()->mutable_initializer())
      if (drop(init.name())) stripTensorData(init);
    return model;
  }
  // Binary: ModelProto.graph (7) -> GraphProto.initializer (5) rewritten one
  // tensor at a time, everything else copied as it is, so at most one
  // tensor's data is in memory beside the result.
  Fd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK));
  if (fd.fd < 0) return err("cannot open " + path + ": " + std::strerror(errno));
  auto size = modelFileSize(fd.fd, path);
  if (!size) return size.takeError();
  google::protobuf::io::FileInputStream file(fd.fd);
  // No total-bytes limit here: one equal to the file size makes the end of
  // the file look like a truncated message (the size was checked above).
  google::protobuf::io::CodedInputStream in(&file);
  std::string kept;
  bool ok;
  {
    google::protobuf::io::StringOutputStream keptStream(&kept);
    google::protobuf::io::CodedOutputStream out(&keptStream);
    ok = filterMessage(in, out, [&](int field, uint32_t tag) -> int {
      if (field != onnx::ModelProto::kGraphFieldNumber) return 0;
      // The graph is filtered in place in the stream (a limit, not a copy).
      uint32_t len;
      if (!in.ReadVarint32(&len)) return -1;
      auto limit = in.PushLimit(static_cast<int>(len));
      std::string filtered;
      bool graphOk;
      {
        google::protobuf::io::StringOutputStream fs(&filtered);
        google::protobuf::io::CodedOutputStream gout(&fs);
        graphOk = filterMessage(in, gout, [&](int gfield, uint32_t gtag) -> int {
          if (gfield != onnx::GraphProto::kInitializerFieldNumber) return 0;
          std::string bytes;
          onnx::TensorProto t;
          if (!readDelimited(in, bytes) || !t.ParseFromString(bytes)) return -1;
          if (drop(t.name())) {
            stripTensorData(t);
            bytes = t.SerializeAsString();
          }
          writeDelimited(gout, gtag, bytes);
          return 1;
        });
      }
      graphOk = graphOk && in.BytesUntilLimit() == 0;
      in.PopLimit(limit);
      if (!graphOk) return -1;
      writeDelimited(out, tag, filtered);
      return 1;
    });
  }
  onnx::ModelProto model;
  if (!ok || file.GetErrno() != 0 || !model.ParseFromString(kept))
    return err(path + ": not a valid ONNX model (protobuf does not parse)");
  return model;
}

void mlir::ds::stripTensorData(onnx::TensorProto &t) {
  t.clear_raw_data();
  t.clear_float_data();
  t.clear_external_data();
  t.set_data_location(onnx::TensorProto_DataLocation_DEFAULT);
}

size_t mlir::ds::onnxElementBytes(int32_t t) {
  switch (t) {
  case onnx::TensorProto_DataType_FLOAT: return 4;
  case onnx::TensorProto_DataType_DOUBLE: return 8;
  case onnx::TensorProto_DataType_FLOAT16: return 2;
  case onnx::TensorProto_DataType_BFLOAT16: return 2;
  case onnx::TensorProto_DataType_INT8: return 1;
  case onnx::TensorProto_DataType_UINT8: return 1;
  case onnx::TensorProto_DataType_INT16: return 2;
  case onnx::TensorProto_DataType_UINT16: return 2;
  case onnx::TensorProto_DataType_INT32: return 4;
  case onnx::TensorProto_DataType_UINT32: return 4;
  case onnx::TensorProto_DataType_UINT64: return 8;
  case onnx::TensorProto_DataType_INT64: return 8;
  case onnx::TensorProto_DataType_BOOL: return 1;
  case kOnnxFloat8E4M3FN:
  case kOnnxFloat8E4M3FNUZ:
  case kOnnxFloat8E5M2:
  case kOnnxFloat8E5M2FNUZ:
  case kOnnxFloat8E8M0: return 1;
  default: return 0; // the packed types too (onnxPackedBits)
  }
}

int mlir::ds::onnxPackedBits(int32_t t) {
  switch (t) {
  case kOnnxUint4:
  case kOnnxInt4:
  case kOnnxFloat4E2M1: return 4;
  case kOnnxUint2:
  case kOnnxInt2: return 2;
  default: return 0;
  }
}

std::string mlir::ds::onnxTypeName(int32_t t) {
  // Debian's onnx schema (1.12) stops at BFLOAT16; data types are plain
  // int32 fields, so the newer ones arrive intact and are named here.
  switch (t) {
  case kOnnxFloat8E4M3FN: return "FLOAT8E4M3FN";
  case kOnnxFloat8E4M3FNUZ: return "FLOAT8E4M3FNUZ";
  case kOnnxFloat8E5M2: return "FLOAT8E5M2";
  case kOnnxFloat8E5M2FNUZ: return "FLOAT8E5M2FNUZ";
  case kOnnxUint4: return "UINT4";
  case kOnnxInt4: return "INT4";
  case kOnnxFloat4E2M1: return "FLOAT4E2M1";
  case kOnnxFloat8E8M0: return "FLOAT8E8M0";
  case kOnnxUint2: return "UINT2";
  case kOnnxInt2: return "INT2";
  case kOnnxFloat6E2M3: return "FLOAT6E2M3";
  case kOnnxFloat6E3M2: return "FLOAT6E3M2";
  default: break;
  }
  if (onnx::TensorProto_DataType_IsValid(t))
    return onnx::TensorProto_DataType_Name(static_cast<onnx::TensorProto_DataType>(t));
  return "type #" + std::to_string(t);
}

namespace {

/// Strict unsigned decimal: digits only, no sign, no overflow.
bool parseDecimal(const std::string &s, uint64_t &out) {
  if (s.empty() || s.size() > 20) return false;
  uint64_t v = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return false;
    uint64_t d = static_cast<uint64_t>(c - '0');
    if (v > (UINT64_MAX - d) / 10) return false;
    v = v * 10 + d;
  }
  out = v;
  return true;
}

/// Opens `rel` strictly beneath `dir`, refusing symlinks anywhere on the
/// way. openat2(RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS) where the kernel
/// has it, else a component-by-component O_NOFOLLOW walk.
llvm::Expected<int> openBeneath(const std::string &dir, const std::string &rel) {
  Fd dirfd(::open(dir.empty() ? "." : dir.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
  if (dirfd.fd < 0)
    return err("cannot open the model's directory " + dir + ": " + std::strerror(errno));
  struct open_how how;
  std::memset(&how, 0, sizeof how);
  how.flags = O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK; // a FIFO must not block
  how.resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS;
  long fd = ::syscall(SYS_openat2, dirfd.fd, rel.c_str(), &how, sizeof how);
  if (fd >= 0) return static_cast<int>(fd);
  if (errno != ENOSYS && errno != EPERM)
    return err("cannot open external data '" + rel + "': " + std::strerror(errno) +
               (errno == ELOOP || errno == EXDEV ? " (symlinks and paths leaving the "
                                                   "model's directory are refused)"
                : errno == ENOENT ? " (ds-opt --shapes-only --report compiles without the "
                                    "weights, for a what-if report)"
                                  : ""));
  // Fallback for kernels without openat2 (or seccomp filters refusing it).
  llvm::SmallVector<llvm::StringRef> parts;
  llvm::StringRef(rel).split(parts, '/', -1, false);
  int cur = ::dup(dirfd.fd);
  for (size_t i = 0; i < parts.size(); ++i) {
    bool last = i + 1 == parts.size();
    std::string part = parts[i].str();
    int next = ::openat(cur, part.c_str(),
                        last ? (O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK)
                             : (O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    int saved = errno;
    ::close(cur);
    if (next < 0)
      return err("cannot open external data '" + rel + "': " + std::strerror(saved) +
                 (saved == ENOENT ? " (ds-opt --shapes-only --report compiles without the "
                                    "weights, for a what-if report)"
                                  : ""));
    cur = next;
  }
  return cur;
}

/// (device, inode) of every file read as external data.
std::set<std::pair<dev_t, ino_t>> &externalFilesRead() {
  static std::set<std::pair<dev_t, ino_t>> files;
  return files;
}

llvm::Expected<std::string> readExternal(const onnx::TensorProto &t,
                                               const std::string &modelDir,
                                               uint64_t wantBytes) {
  std::string location;
  uint64_t offset = 0, length = 0;
  bool haveLength = false;
  std::set<std::string> keys;
  for (const auto &kv : t.external_data()) {
    const std::string &k = kv.key(), &v = kv.value();
    // A key given twice has no one meaning (onnx's loader takes the last).
    if (!keys.insert(k).second)
      return err("external data key '" + k.substr(0, 64) + "' is given twice");
    if (k == "location") {
      location = v;
    } else if (k == "offset") {
      if (!parseDecimal(v, offset))
        return err("external data offset '" + v + "' is not a plain decimal number");
    } else if (k == "length") {
      if (!parseDecimal(v, length))
        return err("external data length '" + v + "' is not a plain decimal number");
      haveLength = true;
    } else if (k == "checksum") {
      return err("external data 'checksum' is not supported yet; remove it or inline the tensor");
    } else {
      return err("unknown external data key '" + k +
                 "' (allowed: location, offset, length, checksum)");
    }
  }
  if (location.empty())
    return err("external data has no location");
  if (location.find('\0') != std::string::npos)
    return err("external data location '" + location.substr(0, location.find('\0')) +
               "\\0...' contains a NUL byte");
  if (location.front() == '/')
    return err("external data location '" + location + "' must be a relative path");
  llvm::SmallVector<llvm::StringRef> parts;
  llvm::StringRef(location).split(parts, '/', -1, false);
  for (llvm::StringRef part : parts)
    if (part == "..")
      return err("external data location '" + location + "' may not contain '..'");
  auto fdOr = openBeneath(modelDir, location);
  if (!fdOr) return fdOr.takeError();
  Fd fd(*fdOr);
  struct stat st;
  if (::fstat(fd.fd, &st) != 0 || !S_ISREG(st.st_mode))
    return err("external data '" + location + "' is not a regular file");
  externalFilesRead().insert({st.st_dev, st.st_ino});
  if (st.st_nlink != 1)
    return err("external data '" + location + "' has " + std::to_string(st.st_nlink) +
               " hard links; only files with one link are read");
  uint64_t size = static_cast<uint64_t>(st.st_size);
  if (offset > size)
    return err(llvm::formatv("external data offset {0} is past the end of '{1}' ({2} bytes)",
                             offset, location, size).str());
  // Without a length the tensor's own size is read from the offset (as
  // onnxruntime does): one file may hold several tensors.
  if (!haveLength) length = wantBytes;
  if (length > size - offset)
    return err(llvm::formatv("external data range {0}+{1} exceeds '{2}' ({3} bytes)", offset,
                             length, location, size).str());
  if (length != wantBytes)
    return err(llvm::formatv("external data length {0} differs from the tensor's {1} bytes",
                             length, wantBytes).str());
  std::string out(length, '\0');
  uint64_t got = 0;
  while (got < length) {
    ssize_t n = ::pread(fd.fd, out.data() + got, length - got, offset + got);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return err("short read of external data '" + location + "'");
    got += static_cast<uint64_t>(n);
  }
  return out;
}

template <typename Src, typename Dst>
void appendAs(std::string &out, const Src &values) {
  for (auto v : values) {
    Dst d = static_cast<Dst>(v);
    const char *p = reinterpret_cast<const char *>(&d);
    out.append(p, sizeof(Dst));
  }
}

} // namespace

static llvm::Expected<TensorPayload> decodeTensor(const onnx::TensorProto &t,
                                                  onnx::TensorProto *owner,
                                                  const std::string &modelDir);

llvm::Expected<TensorPayload> mlir::ds::readTensorPayload(const onnx::TensorProto &t,
                                                          const std::string &modelDir) {
  return decodeTensor(t, nullptr, modelDir);
}

llvm::Expected<TensorPayload> mlir::ds::takeTensorPayload(onnx::TensorProto &t,
                                                          const std::string &modelDir) {
  return decodeTensor(t, &t, modelDir);
}

// `owner`, when given, is `t` itself: its raw_data moves into the payload.
static llvm::Expected<TensorPayload> decodeTensor(const onnx::TensorProto &t,
                                                  onnx::TensorProto *owner,
                                                  const std::string &modelDir) {
  TensorPayload p;
  p.dataType = t.data_type();
  // 4- and 2-bit types travel packed, low bits first; the payload holds
  // one element per byte (MLIR's and the plan's storage).
  const int packedBits = onnxPackedBits(p.dataType);
  size_t eb = packedBits ? 1 : onnxElementBytes(p.dataType);
  if (eb == 0)
    return err("tensor '" + t.name() + "' has unsupported element type " +
               onnxTypeName(p.dataType));
  if (t.dims_size() > static_cast<int>(kMaxTensorRank))
    return err("tensor '" + t.name() + "' has rank " + std::to_string(t.dims_size()) +
               ", over the limit of 1024");
  uint64_t n = 1;
  for (int64_t d : t.dims()) {
    if (d < 0)
      return err("tensor '" + t.name() + "' has a negative dimension");
    if (d != 0 && n > (uint64_t(1) << 62) / static_cast<uint64_t>(d))
      return err("tensor '" + t.name() + "' has an element count that overflows");
    n *= static_cast<uint64_t>(d);
    p.shape.push_back(d);
  }
  if (n > (uint64_t(1) << 62) / eb)
    return err("tensor '" + t.name() + "' is too large");
  uint64_t want = n * eb;
  const uint64_t packedBytes = packedBits ? (n * packedBits + 7) / 8 : want;
  // The packed stream's elements, one per byte (padding bits dropped).
  auto unpack = [&](const std::string &packed) {
    std::string out(n, '\0');
    const unsigned perByte = 8 / packedBits, mask = (1u << packedBits) - 1;
    for (uint64_t i = 0; i < n; ++i)
      out[i] = static_cast<char>(
          (static_cast<uint8_t>(packed[i / perByte]) >> (packedBits * (i % perByte))) & mask);
    return out;
  };
  // One source of values: ONNX's checker refuses a second, and reading one
  // would silently drop the other.
  int typedFields = (t.float_data_size() > 0) + (t.int32_data_size() > 0) +
                    (t.int64_data_size() > 0) + (t.double_data_size() > 0) +
                    (t.uint64_data_size() > 0) + (t.string_data_size() > 0);
  bool external =
      t.has_data_location() && t.data_location() == onnx::TensorProto_DataLocation_EXTERNAL;
  if (external + t.has_raw_data() + (typedFields > 0) > 1 || typedFields > 1)
    return err("tensor '" + t.name() + "' holds its values in more than one of raw_data, "
               "the typed *_data fields and external data");
  if (external) {
    auto bytes = readExternal(t, modelDir, packedBytes);
    if (!bytes)
      return err("tensor '" + t.name() + "': " + llvm::toString(bytes.takeError()));
    p.bytes = packedBits ? unpack(*bytes) : std::move(*bytes);
    return p;
  }
  if (t.external_data_size() > 0)
    return err("tensor '" + t.name() + "' has external_data but is not marked EXTERNAL");
  if (t.has_raw_data()) {
    if (t.raw_data().size() != packedBytes)
      return err(llvm::formatv("tensor '{0}' has {1} bytes of raw_data but its shape and "
                               "type need {2}",
                               t.name(), t.raw_data().size(), packedBytes).str());
    if (packedBits) p.bytes = unpack(t.raw_data());
    else if (owner) p.bytes.swap(*owner->mutable_raw_data());
    else p.bytes.assign(t.raw_data().begin(), t.raw_data().end());
    if (p.dataType == onnx::TensorProto_DataType_BOOL)
      for (char &c : p.bytes) c = c ? 1 : 0;
    return p;
  }
  auto count = [&](int have) -> llvm::Error {
    if (static_cast<uint64_t>(have) != n)
      return err(llvm::formatv("tensor '{0}' holds {1} values but its shape needs {2}",
                               t.name(), have, n).str());
    return llvm::Error::success();
  };
  // Narrow types travel in int32_data (uint32 in uint64_data): a value
  // outside the type would wrap silently.
  auto fits = [&](const auto &values, int64_t lo, int64_t hi) -> llvm::Error {
    for (auto v : values)
      if (static_cast<int64_t>(v) < lo || static_cast<int64_t>(v) > hi)
        return err(llvm::formatv("tensor '{0}' holds {1}, outside its {2} range [{3}, {4}]",
                                 t.name(), static_cast<int64_t>(v),
                                 onnxTypeName(p.dataType) +
                                     (packedBits ? " (packed bytes)" : ""),
                                 lo, hi).str());
    return llvm::Error::success();
  };
  if (llvm::Error e = [&]() -> llvm::Error {
        switch (p.dataType) {
        case onnx::TensorProto_DataType_INT8: return fits(t.int32_data(), -128, 127);
        case onnx::TensorProto_DataType_UINT8: return fits(t.int32_data(), 0, 255);
        case onnx::TensorProto_DataType_INT16: return fits(t.int32_data(), -32768, 32767);
        case onnx::TensorProto_DataType_UINT16:
        case onnx::TensorProto_DataType_FLOAT16:
        case onnx::TensorProto_DataType_BFLOAT16: return fits(t.int32_data(), 0, 65535);
        case onnx::TensorProto_DataType_UINT32: return fits(t.uint64_data(), 0, 4294967295LL);
        case kOnnxFloat8E4M3FN:
        case kOnnxFloat8E4M3FNUZ:
        case kOnnxFloat8E5M2:
        case kOnnxFloat8E5M2FNUZ:
        case kOnnxFloat8E8M0: return fits(t.int32_data(), 0, 255); // bit patterns
        default:
          return packedBits ? fits(t.int32_data(), 0, 255) // packed bytes
                            : llvm::Error::success();
        }
      }())
    return std::move(e);
  // Reserve no more than the values the tensor holds: a shape of 10^12
  // with no values is the count error below, not an allocation of 4 TB.
  uint64_t held = static_cast<uint64_t>(t.float_data_size()) + t.int32_data_size() +
                  t.int64_data_size() + t.double_data_size() + t.uint64_data_size();
  p.bytes.reserve(std::min<uint64_t>(want, held * eb));
  switch (p.dataType) {
  case onnx::TensorProto_DataType_FLOAT:
    if (auto e = count(t.float_data_size())) return std::move(e);
    appendAs<decltype(t.float_data()), float>(p.bytes, t.float_data());
    break;
  case onnx::TensorProto_DataType_DOUBLE:
    if (auto e = count(t.double_data_size())) return std::move(e);
    appendAs<decltype(t.double_data()), double>(p.bytes, t.double_data());
    break;
  case onnx::TensorProto_DataType_INT64:
    if (auto e = count(t.int64_data_size())) return std::move(e);
    appendAs<decltype(t.int64_data()), int64_t>(p.bytes, t.int64_data());
    break;
  case onnx::TensorProto_DataType_INT32:
    if (auto e = count(t.int32_data_size())) return std::move(e);
    appendAs<decltype(t.int32_data()), int32_t>(p.bytes, t.int32_data());
    break;
  case onnx::TensorProto_DataType_UINT32:
    // ONNX keeps uint32 and uint64 values in uint64_data.
    if (auto e = count(t.uint64_data_size())) return std::move(e);
    appendAs<decltype(t.uint64_data()), uint32_t>(p.bytes, t.uint64_data());
    break;
  case onnx::TensorProto_DataType_UINT64:
    if (auto e = count(t.uint64_data_size())) return std::move(e);
    appendAs<decltype(t.uint64_data()), uint64_t>(p.bytes, t.uint64_data());
    break;
  case onnx::TensorProto_DataType_INT16:
  case onnx::TensorProto_DataType_UINT16:
  case onnx::TensorProto_DataType_FLOAT16:
  case onnx::TensorProto_DataType_BFLOAT16:
    if (auto e = count(t.int32_data_size())) return std::move(e);
    appendAs<decltype(t.int32_data()), uint16_t>(p.bytes, t.int32_data());
    break;
  case onnx::TensorProto_DataType_INT8:
  case onnx::TensorProto_DataType_UINT8:
    if (auto e = count(t.int32_data_size())) return std::move(e);
    appendAs<decltype(t.int32_data()), uint8_t>(p.bytes, t.int32_data());
    break;
  case onnx::TensorProto_DataType_BOOL:
    if (auto e = count(t.int32_data_size())) return std::move(e);
    for (int32_t v : t.int32_data()) p.bytes.push_back(v ? 1 : 0);
    break;
  case kOnnxFloat8E4M3FN:
  case kOnnxFloat8E4M3FNUZ:
  case kOnnxFloat8E5M2:
  case kOnnxFloat8E5M2FNUZ:
  case kOnnxFloat8E8M0:
    if (auto e = count(t.int32_data_size())) return std::move(e);
    appendAs<decltype(t.int32_data()), uint8_t>(p.bytes, t.int32_data());
    break;
  case kOnnxUint4:
  case kOnnxInt4:
  case kOnnxFloat4E2M1:
  case kOnnxUint2:
  case kOnnxInt2: {
    // One packed byte per int32.
    if (static_cast<uint64_t>(t.int32_data_size()) != packedBytes)
      return err(llvm::formatv("tensor '{0}' holds {1} packed bytes in int32_data but its "
                               "shape and type need {2}",
                               t.name(), t.int32_data_size(), packedBytes).str());
    std::string packed;
    appendAs<decltype(t.int32_data()), uint8_t>(packed, t.int32_data());
    p.bytes = unpack(packed);
    break;
  }
  default:
    return err("tensor '" + t.name() + "' has unsupported element type " +
               onnxTypeName(p.dataType));
  }
  return p;
}

bool mlir::ds::isExternalDataFile(const std::string &path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 && externalFilesRead().count({st.st_dev, st.st_ino});
}
