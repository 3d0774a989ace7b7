#include "base/cpu_affinity.h"

#include <pthread.h>
#include <sched.h>

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

}  // namespace tarmac
