// .npy/.npz reading and writing, including the malformed inputs.
#include <gtest/gtest.h>

#include <cstring>
#include <fstream>

#include "runtime/io/Npy.h"

using namespace ds::rt;
namespace plan = ds::plan;

namespace {

HostArray f32(std::vector<int64_t> shape, std::vector<float> v) {
  HostArray a;
  a.dtype = plan::F32;
  a.shape = std::move(shape);
  a.data.resize(v.size() * 4);
  std::memcpy(a.data.data(), v.data(), a.data.size());
  return a;
}

TEST(Npy, RoundTripsThroughNpz) {
  std::string path = testing::TempDir() + "/rt.npz";
  std::vector<std::pair<std::string, HostArray>> arrays = {
      {"a", f32({2, 2}, {1, 2, 3, 4})}, {"scalar", f32({}, {5})}, {"v", f32({1}, {6})}};
  ASSERT_TRUE(writeNpz(path, arrays).ok());
  auto back = readNpz(path);
  ASSERT_TRUE(back.ok()) << back.status().message();
  ASSERT_EQ(back->size(), 3u);
  EXPECT_EQ((*back)[0].first, "a");
  EXPECT_EQ((*back)[0].second.shape, (std::vector<int64_t>{2, 2}));
  EXPECT_EQ((*back)[1].second.shape, std::vector<int64_t>{});
  EXPECT_EQ((*back)[2].second.shape, std::vector<int64_t>{1});
  EXPECT_EQ((*back)[0].second.data, arrays[0].second.data);
}

TEST(Npy, MalformedHeadersAreErrors) {
  auto good = serializeNpy(f32({2}, {1, 2}));
  EXPECT_TRUE(parseNpy(good.data(), good.size(), "good").ok());
  auto shortData = good;
  shortData.pop_back();
  auto st = parseNpy(shortData.data(), shortData.size(), "short.npy");
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.status().message().find("short.npy"), std::string::npos);
  std::string h("\x93NUMPY\x01\x00", 8);
  std::string dict = "{'descr': '<c8', 'fortran_order': False, 'shape': (1,), }";
  std::vector<uint8_t> bad(h.begin(), h.end());
  bad.push_back(static_cast<uint8_t>(dict.size()));
  bad.push_back(0);
  bad.insert(bad.end(), dict.begin(), dict.end());
  bad.resize(bad.size() + 8);
  auto r = parseNpy(bad.data(), bad.size(), "complex.npy");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("unsupported dtype"), std::string::npos);
  std::vector<uint8_t> junk = {'n', 'o', 'p', 'e', 0, 0, 0, 0, 0, 0, 0};
  EXPECT_FALSE(parseNpy(junk.data(), junk.size(), "junk").ok());
}

/// A v1.0 .npy of `dict` (its header padded as numpy pads it) and `body`.
std::vector<uint8_t> npyWithHeader(const std::string &dict, size_t body) {
  std::string header = dict;
  while ((10 + header.size() + 1) % 64) header += ' ';
  header += '\n';
  std::string magic("\x93NUMPY\x01\x00", 8);
  std::vector<uint8_t> out(magic.begin(), magic.end());
  out.push_back(static_cast<uint8_t>(header.size()));
  out.push_back(static_cast<uint8_t>(header.size() >> 8));
  out.insert(out.end(), header.begin(), header.end());
  out.resize(out.size() + body);
  return out;
}

TEST(Npy, ABadDimensionIsQuotedAlone) {
  // The message quotes the dimension, not the rest of the header after it.
  auto bytes = npyWithHeader("{'descr': '<f4', 'fortran_order': False, 'shape': (-16, 8), }", 0);
  auto r = parseNpy(bytes.data(), bytes.size(), "neg.npy");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(), "neg.npy: bad dimension '-16' in .npy shape");
}

TEST(Npy, NotAZipIsAnError) {
  std::string path = testing::TempDir() + "/notzip.npz";
  std::ofstream(path) << "definitely not a zip archive";
  auto r = readNpz(path);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("notzip.npz"), std::string::npos);
}

} // namespace
