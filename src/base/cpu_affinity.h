// Pinning threads to CPUs (Linux sched affinity): keeps one model's threads off the cores
// another model uses, so their speeds do not depend on each other.
// Pure functions over the calling process's threads; thread-safe.
#pragma once

#include <thread>
#include <vector>

#include "base/status.h"

namespace tarmac {

// Checks that every id names an online CPU (and that the list is not empty). Field "cpus".
Status CheckCpus(const std::vector<int>& cpus);
// Restricts the calling thread / `t` to `cpus`. Preconditions: CheckCpus(cpus).ok().
Status PinCurrentThread(const std::vector<int>& cpus);
Status PinThread(std::thread& t, const std::vector<int>& cpus);

}  // namespace tarmac
