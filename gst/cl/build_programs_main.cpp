// op-build-programs: the helper process of ProgramCache::BuildAll and BuildKernels (see
// program_cache.h).
//
//   op-build-programs DEVICE DIR REQUESTS
//
// Opens DEVICE ("P:D"), reads the programs REQUESTS lists (written by BuildAll) and builds them
// from the last to the first into the binary cache DIR, skipping those whose binary is there
// already (the parent walks the same list from the first, loading what this process stored).
// Written by BuildKernels, it builds the linked programs BuildKernels plans for them from the
// last, each claimed first, until it meets one the parent claimed.
// Exit status 0 when every program it took was stored; the parent never depends on it: a program
// this process did not store, the parent builds itself.
#include <sys/prctl.h>
#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "device.h"
#include "program_cache.h"

int main(int argc, char **argv) {
  // Its work is only for the process that started it: gone with it (the thread that starts the
  // helper waits for or stops it before returning, so it outlives the helper's useful life).
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (getppid() == 1)
    return 1;
  if (argc != 4) {
    std::fprintf(stderr, "usage: op-build-programs DEVICE DIR REQUESTS\n");
    return 2;
  }
  std::ifstream in(argv[3], std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  auto requests = op::cl::ParseProgramRequests(ss.str());
  if (!requests.ok()) {
    std::fprintf(stderr, "op-build-programs: %s: %s\n", argv[3],
                 requests.status().ToString().c_str());
    return 2;
  }
  auto device = op::cl::Device::Open(argv[1]);
  if (!device.ok()) {
    std::fprintf(stderr, "op-build-programs: %s\n", device.status().ToString().c_str());
    return 1;
  }
  op::cl::Device &d = **device;
  op::cl::ProgramCache cache(d.context(), d.id(), d.caps(), argv[2]);
  if (requests->link) {  // BuildKernels': its linked programs, from the last
    std::vector<op::cl::ProgramRequest> all;
    for (const op::cl::StoredProgramRequest &r : requests->requests)
      all.push_back({r.source, r.options, r.label});
    return cache.BuildLinkedFromEnd(all, requests->link_options).ok() ? 0 : 1;
  }
  int failed = 0;
  for (size_t i = requests->requests.size(); i-- > 0;) {
    const op::cl::StoredProgramRequest &r = requests->requests[i];
    if (cache.HasBinary(r.source, r.options))
      continue;
    if (!cache.Build(r.source, r.options, r.label).ok())
      failed++;
  }
  return failed ? 1 : 0;
}
