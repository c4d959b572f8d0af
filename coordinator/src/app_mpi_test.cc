// Tests of app_mpi.h: reading ldd's answer, and the refusal's message.
#include "app_mpi.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>

namespace dlckpt::run {
namespace {

TEST(AppMpi, FindsEachMpiInLddOutput) {
  // As ldd prints them (the paths need not exist: the names decide).
  const std::string openmpi =
      "\tlinux-vdso.so.1 (0x00007ffc3b5f2000)\n"
      "\tlibmpi.so.40 => /nonexistent/lib/libmpi.so.40 (0x00007f0a1c000000)\n"
      "\tlibc.so.6 => /lib/x86_64-linux-gnu/libc.so.6 (0x00007f0a1be00000)\n"
      "\t/lib64/ld-linux-x86-64.so.2 (0x00007f0a1c400000)\n";
  ProgramMpi m = MpiLibrariesIn(openmpi);
  EXPECT_EQ(m.openmpi, "/nonexistent/lib/libmpi.so.40");
  EXPECT_EQ(m.mpich, "");
  m = MpiLibrariesIn("\tlibmpich.so.12 => /nonexistent/libmpich.so.12 (0x1)\n\tlibmpi.so.40 => not found\n");
  EXPECT_EQ(m.mpich, "/nonexistent/libmpich.so.12");
  EXPECT_EQ(m.openmpi, "libmpi.so.40");  // a library ldd cannot find still names the MPI
  // Intel MPI's libmpi.so.12, Open MPI's Fortran and C++ libraries alone, and
  // nothing: no MPI of either kind.
  m = MpiLibrariesIn("\tlibmpi.so.12 => /opt/intel/libmpi.so.12 (0x1)\n\tlibmpi_cxx.so.40 => /x/libmpi_cxx.so.40 (0x2)\n");
  EXPECT_EQ(m.mpich, "");
  EXPECT_EQ(m.openmpi, "");
  m = MpiLibrariesIn("\tnot a dynamic executable\n");
  EXPECT_EQ(m.mpich + m.openmpi, "");
}

TEST(AppMpi, RefusesTheOtherMpiAndTwoMpisWithTheFix) {
  ProgramMpi none, mpich{"/l/libmpich.so.12", ""}, openmpi{"", "/l/libmpi.so.40"}, both{"/l/libmpich.so.12", "/l/libmpi.so.40"};
  EXPECT_TRUE(CheckProgramMpi("./app", none, "mpich", "/usr/bin/mpiexec.mpich").ok());
  EXPECT_TRUE(CheckProgramMpi("./app", mpich, "mpich", "/usr/bin/mpiexec.mpich").ok());
  EXPECT_TRUE(CheckProgramMpi("./app", openmpi, "openmpi", "/usr/bin/mpirun.openmpi").ok());

  Status s = CheckProgramMpi("./app", openmpi, "mpich", "/usr/bin/mpiexec.mpich");
  EXPECT_EQ(s.code(), ENOTSUP);
  EXPECT_NE(s.message().find("./app is linked with Open MPI (/l/libmpi.so.40), and dlckpt is built with MPICH"),
            std::string::npos) << s.ToString();
  EXPECT_NE(s.message().find("/usr/bin/mpiexec.mpich"), std::string::npos);
  EXPECT_NE(s.message().find("rank 0 of 1"), std::string::npos);
  EXPECT_NE(s.message().find("mpicc.mpich"), std::string::npos);
  EXPECT_NE(s.message().find("-DDLCKPT_MPI=openmpi"), std::string::npos);

  s = CheckProgramMpi("./app", mpich, "openmpi", "/usr/bin/mpirun.openmpi");
  EXPECT_EQ(s.code(), ENOTSUP);
  EXPECT_NE(s.message().find("linked with MPICH (/l/libmpich.so.12), and dlckpt is built with Open MPI"),
            std::string::npos) << s.ToString();
  EXPECT_NE(s.message().find("mpicc.openmpi"), std::string::npos);
  EXPECT_NE(s.message().find("-DDLCKPT_MPI=mpich"), std::string::npos);

  s = CheckProgramMpi("./app", both, "mpich", "/usr/bin/mpiexec.mpich");
  EXPECT_EQ(s.code(), ENOTSUP);
  EXPECT_NE(s.message().find("two MPI libraries, MPICH (/l/libmpich.so.12) and Open MPI (/l/libmpi.so.40)"),
            std::string::npos) << s.ToString();
}

TEST(AppMpi, ProgramsLddCannotAnswerForAreNotChecked) {
  EXPECT_FALSE(ProgramMpiLibraries("/nonexistent/program").has_value());
  EXPECT_FALSE(ProgramMpiLibraries("no-such-program-xyz").has_value());
  // A script: ldd says "not a dynamic executable" and fails.
  char dir[] = "/tmp/dlckpt-app-mpi.XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  const std::string script = std::string(dir) + "/run.sh";
  FILE* f = std::fopen(script.c_str(), "w");
  ASSERT_NE(f, nullptr);
  std::fputs("#!/bin/sh\nexit 0\n", f);
  std::fclose(f);
  ASSERT_EQ(chmod(script.c_str(), 0755), 0);
  EXPECT_FALSE(ProgramMpiLibraries(script).has_value());
  unlink(script.c_str());
  rmdir(dir);
  // A dynamic executable without MPI.
  auto m = ProgramMpiLibraries("/bin/true");
  ASSERT_TRUE(m.has_value());
  EXPECT_EQ(m->mpich + m->openmpi, "");
}

}  // namespace
}  // namespace dlckpt::run
