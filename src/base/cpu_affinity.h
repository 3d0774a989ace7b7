// Pinning threads to CPUs (Linux sched affinity), and where a pool's threads go.
//
// Why pin at all: a compute pool's threads must each have a CPU of their own. On an idle
// machine the OS may leave a woken worker on its waker's CPU; the two cannot run at once,
// so every parallel job runs at one thread's speed for as long as that lasts (an idle
// 2-thread engine's prefill ran ~2.6x slower in whole phases; bench/NOTES.md). And a model
// pinned to its own CPUs keeps its speed independent of another model's.
// Pure functions over the calling process's threads; thread-safe.
#pragma once

#include <thread>
#include <vector>

#include "base/status.h"

namespace tarmac {

// The CPUs this process may run on (its affinity mask, ascending; never empty).
std::vector<int> AllowedCpus();

// Checks that every id names an online CPU (and that the list is not empty). Field "cpus".
Status CheckCpus(const std::vector<int>& cpus);
// Restricts the calling thread / `t` to `cpus`. Preconditions: CheckCpus(cpus).ok().
Status PinCurrentThread(const std::vector<int>& cpus);
Status PinThread(std::thread& t, const std::vector<int>& cpus);

// The CPUs thread `t` of a pool of `threads` (thread 0: the caller) runs on when the pool is
// given `cpus`: CPU cpus[t] alone when there are at least as many CPUs as threads, else all
// of `cpus` (the OS shares them). Preconditions: !cpus.empty(), 0 <= t < threads.
std::vector<int> ThreadCpus(const std::vector<int>& cpus, int threads, int t);

// The default placement of several pools in one process (engine i has threads[i] threads):
// consecutive CPUs of `allowed`, each thread its own, when together they use exactly all of
// `allowed` (the process owns the machine it was given); otherwise none (empty lists: the
// OS places them, since pinning an oversubscribed or partial set would keep the OS from
// moving threads off CPUs other work needs).
std::vector<std::vector<int>> DefaultPlacement(const std::vector<int>& threads, const std::vector<int>& allowed);

}  // namespace tarmac
