#include "base/cpu_affinity.h"

#include <pthread.h>
#include <sched.h>

#include <numeric>

#include "base/check.h"

namespace tarmac {
namespace {

Status Pin(pthread_t thread, const std::vector<int>& cpus) {
  cpu_set_t set;
  CPU_ZERO(&set);
  for (int c : cpus) CPU_SET(c, &set);
  if (const int rc = pthread_setaffinity_np(thread, sizeof(set), &set); rc != 0)
    return IoError("cannot pin a thread to the given CPUs (pthread_setaffinity_np error {})", rc);
  return Status::Ok();
}

}  // namespace

std::vector<int> AllowedCpus() {
  cpu_set_t allowed;
  CPU_ZERO(&allowed);
  std::vector<int> out;
  if (sched_getaffinity(0, sizeof(allowed), &allowed) == 0) {
    for (int c = 0; c < CPU_SETSIZE; ++c)
      if (CPU_ISSET(c, &allowed)) out.push_back(c);
  }
  if (out.empty()) out.push_back(sched_getcpu() >= 0 ? sched_getcpu() : 0);
  return out;
}

Status CheckCpus(const std::vector<int>& cpus) {
  if (cpus.empty()) return InvalidField("cpus", "the CPU list is empty");
  cpu_set_t allowed;
  CPU_ZERO(&allowed);
  if (sched_getaffinity(0, sizeof(allowed), &allowed) != 0) return IoError("cannot read this process's CPU affinity");
  for (int c : cpus) {
    if (c < 0 || c >= CPU_SETSIZE || !CPU_ISSET(c, &allowed))
      return InvalidField("cpus", "CPU {} is not one this process may run on", c);
  }
  return Status::Ok();
}

Status PinCurrentThread(const std::vector<int>& cpus) { return Pin(pthread_self(), cpus); }
Status PinThread(std::thread& t, const std::vector<int>& cpus) { return Pin(t.native_handle(), cpus); }

std::vector<int> ThreadCpus(const std::vector<int>& cpus, int threads, int t) {
  TARMAC_CHECK(!cpus.empty() && t >= 0 && t < threads);
  if (static_cast<int>(cpus.size()) >= threads) return {cpus[t]};
  return cpus;
}

std::vector<std::vector<int>> DefaultPlacement(const std::vector<int>& threads, const std::vector<int>& allowed) {
  std::vector<std::vector<int>> out(threads.size());
  if (std::accumulate(threads.begin(), threads.end(), 0) != static_cast<int>(allowed.size())) return out;
  size_t next = 0;
  for (size_t i = 0; i < threads.size(); ++i)
    for (int t = 0; t < threads[i]; ++t) out[i].push_back(allowed[next++]);
  return out;
}

}  // namespace tarmac
