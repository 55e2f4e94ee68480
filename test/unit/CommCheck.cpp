// ds-comm-check: runs every collective of the selected communicator with
// data whose correct result is known, on split groups too, and exits
// non-zero on a mismatch. Launched by test/Runtime/comm-*.test under mpirun
// (and with DS_FAULT, to show a dead or hung peer ends every rank).
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "runtime/comm/Comm.h"

using namespace ds::rt;

namespace {
int failures = 0;
void expect(bool ok, const std::string &what, int rank) {
  if (!ok) {
    std::fprintf(stderr, "rank %d: %s is wrong\n", rank, what.c_str());
    ++failures;
  }
}
void check(const absl::Status &s, Comm &comm) {
  if (!s.ok()) {
    std::fprintf(stderr, "ds-comm-check: rank %d: %s\n", comm.rank(),
                 std::string(s.message()).c_str());
    comm.abort(2);
  }
}

void exercise(Comm &c, const std::string &tag) {
  int r = c.rank(), n = c.size();
  // all_reduce sum and max of f32 and i64
  std::vector<float> f(5);
  for (int i = 0; i < 5; ++i) f[i] = float(r * 10 + i);
  check(c.allReduce(f.data(), 5, ds::plan::F32, ReduceOp::Sum), c);
  for (int i = 0; i < 5; ++i)
    expect(f[i] == float(10 * n * (n - 1) / 2 + n * i), tag + " all_reduce sum", r);
  std::vector<int64_t> m = {int64_t(r), int64_t(-r)};
  check(c.allReduce(m.data(), 2, ds::plan::I64, ReduceOp::Max), c);
  expect(m[0] == n - 1 && m[1] == 0, tag + " all_reduce max", r);
  // all_gather: block i from rank i
  std::vector<float> mine = {float(r), float(r) + 0.5f}, all(2 * n);
  check(c.allGather(mine.data(), all.data(), 2, ds::plan::F32), c);
  for (int i = 0; i < n; ++i)
    expect(all[2 * i] == float(i) && all[2 * i + 1] == float(i) + 0.5f, tag + " all_gather", r);
  // reduce_scatter: block i of every rank summed lands on rank i
  std::vector<double> blocks(3 * n), out(3);
  for (int i = 0; i < 3 * n; ++i) blocks[i] = i + r;
  check(c.reduceScatter(blocks.data(), out.data(), 3, ds::plan::F64, ReduceOp::Sum), c);
  for (int j = 0; j < 3; ++j)
    expect(out[j] == double(n * (3 * r + j) + n * (n - 1) / 2), tag + " reduce_scatter", r);
  // broadcast from the last rank
  std::vector<int32_t> b = {r, r * 2, r * 3};
  check(c.broadcast(b.data(), 3, ds::plan::I32, n - 1), c);
  expect(b[0] == n - 1 && b[2] == 3 * (n - 1), tag + " broadcast", r);
  // all_to_all: block j of rank i -> block i of rank j
  std::vector<int32_t> send(n), recv(n);
  for (int j = 0; j < n; ++j) send[j] = 100 * r + j;
  check(c.allToAll(send.data(), recv.data(), 1, ds::plan::I32), c);
  for (int i = 0; i < n; ++i) expect(recv[i] == 100 * i + r, tag + " all_to_all", r);
  check(c.barrier(), c);
}
} // namespace

int main(int argc, char **argv) {
  CommOptions opts;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a.rfind("--comm=", 0) == 0) opts.kind = a.substr(7);
    else if (a.rfind("--timeout=", 0) == 0) opts.timeout_seconds = std::atof(a.c_str() + 10);
  }
  auto comm = createComm(opts);
  if (!comm.ok()) {
    std::fprintf(stderr, "ds-comm-check: %s\n", std::string(comm.status().message()).c_str());
    return 1;
  }
  Comm &world = **comm;
  exercise(world, "world");
  // Two groups (even and odd ranks), like one mesh axis of a 2-D mesh.
  auto half = world.split(world.rank() % 2, world.rank());
  check(half.status(), world);
  exercise(**half, "split");
  if (failures) world.abort(1);
  if (world.rank() == 0)
    std::printf("ds-comm-check: %s, %d ranks: every collective correct\n", world.name().c_str(),
                world.size());
  half->reset();
  comm->reset();
  return 0;
}
