// The communication "stream" of the CPU backend: one thread that runs
// collectives in submission order, so they overlap the compute steps that
// do not touch their buffers. Tickets are the events the Session waits on.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <system_error>
#include <thread>

#include "runtime/plan/Status.h"

namespace ds::rt {

class CommWorker {
public:
  using Task = std::function<absl::Status()>;
  CommWorker() : thread_([this] { loop(); }) {}
  /// A started worker, or an error naming `what` when the thread cannot be
  /// created (an address-space or thread limit: docs/security.md).
  static absl::StatusOr<std::unique_ptr<CommWorker>> start(const char *what) {
    try {
      return std::make_unique<CommWorker>();
    } catch (const std::system_error &e) {
      return absl::ResourceExhaustedError(
          absl::StrCat("out of memory: cannot start the ", what, " thread (", e.what(),
                       "); raise the memory or thread limit (ulimit -v / -u)"));
    }
  }
  ~CommWorker() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }
  CommWorker(const CommWorker &) = delete;
  CommWorker &operator=(const CommWorker &) = delete;

  /// Queues `task`; the returned ticket is waited on with wait().
  uint64_t submit(Task task) {
    std::lock_guard<std::mutex> lock(mu_);
    uint64_t t = ++submitted_;
    queue_.push_back({t, std::move(task)});
    cv_.notify_all();
    return t;
  }
  /// Blocks until `ticket` ran; returns its status (each ticket once).
  absl::Status wait(uint64_t ticket) {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return results_.count(ticket) != 0; });
    absl::Status st = results_[ticket];
    results_.erase(ticket);
    return st;
  }

private:
  void loop() {
    for (;;) {
      std::pair<uint64_t, Task> job;
      {
        std::unique_lock<std::mutex> lock(mu_);
        cv_.wait(lock, [&] { return stop_ || !queue_.empty(); });
        if (queue_.empty()) return;
        job = std::move(queue_.front());
        queue_.pop_front();
      }
      absl::Status st = job.second();
      {
        std::lock_guard<std::mutex> lock(mu_);
        results_[job.first] = st;
      }
      cv_.notify_all();
    }
  }

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::pair<uint64_t, Task>> queue_;
  std::map<uint64_t, absl::Status> results_;
  uint64_t submitted_ = 0;
  bool stop_ = false;
  std::thread thread_; // last: starts after the members it uses
};

} // namespace ds::rt
