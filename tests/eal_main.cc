// main() for tests that need DPDK: one EAL per process (rte_eal_init can run
// once), without hugepages, with a file prefix of its own so tests and other
// DPDK processes never share runtime files. Single-file segments make the
// memory one memfd, which an in-process virtio-user guest can share with the
// vhost-user backend.
#include <signal.h>
#include <unistd.h>

#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <rte_eal.h>

int main(int argc, char** argv) {
  testing::InitGoogleTest(&argc, argv);
  // As in straitd: a vhost-user peer closing its socket must not kill us.
  signal(SIGPIPE, SIG_IGN);
  std::string prefix = "--file-prefix=strait-test-" + std::to_string(getpid());
  std::vector<std::string> args = {"strait-test", "--no-huge",  "-m", "512",
                                   "--no-pci",    "--lcores=0@(0-1),1@(0-1),2@(0-1)",
                                   "--log-level=lib.eal:error", "--single-file-segments", prefix};
  std::vector<char*> cargs;
  for (auto& a : args) cargs.push_back(a.data());
  if (rte_eal_init(static_cast<int>(cargs.size()), cargs.data()) < 0) {
    fprintf(stderr, "rte_eal_init failed\n");
    return 1;
  }
  int rc = RUN_ALL_TESTS();
  rte_eal_cleanup();
  return rc;
}
